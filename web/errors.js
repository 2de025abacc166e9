// Loaded before everything else: any JavaScript error of the page (a script that does not
// parse, an exception, a rejected promise) is shown in a banner and kept in
// window.gpuschedErrors, where the browser tests read it. A dashboard that breaks says so.
"use strict";
window.gpuschedErrors = [];
(function () {
  function record(text) {
    window.gpuschedErrors.push(String(text));
    var banner = document.getElementById("js-error");
    if (banner) {
      banner.hidden = false;
      banner.textContent = "The dashboard hit an error: " + window.gpuschedErrors.join("; ");
    }
  }
  window.addEventListener("error", function (e) {
    record((e.message || "error") + (e.filename ? " (" + e.filename + ":" + e.lineno + ")" : ""));
  });
  window.addEventListener("unhandledrejection", function (e) {
    record("unhandled rejection: " + (e.reason && e.reason.message ? e.reason.message : e.reason));
  });
})();
