// WriteOutputs (sim/report.h): the files and the gnuplot plots.

#include <algorithm>
#include <cstdio>
#include <functional>
#include <filesystem>
#include <fstream>
#include <vector>

#include "sim/report.h"

namespace gpusched::sim {
namespace {

Status WriteFile(const std::filesystem::path& path, const std::string& what,
                 const std::function<void(std::ostream&)>& fill) {
  std::ofstream out(path);
  if (!out) return Unavailable("out: cannot write " + path.string() + " (" + what + ")");
  fill(out);
  out.close();
  if (!out) return Unavailable("out: error writing " + path.string());
  return Status::Ok();
}

// Sorted JCTs as (jct_h, fraction) for a CDF, at most ~1000 points.
void WriteJctCdf(std::ostream& out, const SimResult& r) {
  std::vector<double> jct;
  for (const JobRecord& j : r.jobs) {
    if (j.outcome == JobOutcome::kFinished && j.finish_ms >= 0) {
      jct.push_back(static_cast<double>(j.finish_ms - j.submit_ms) / 3'600'000.0);
    }
  }
  std::sort(jct.begin(), jct.end());
  const size_t step = std::max<size_t>(1, jct.size() / 1000);
  out << "jct_h,fraction\n";
  for (size_t i = 0; i < jct.size(); i += step) {
    out << jct[i] << ',' << static_cast<double>(i + 1) / static_cast<double>(jct.size()) << '\n';
  }
  if (!jct.empty()) out << jct.back() << ",1\n";
}

std::string Quote(const std::filesystem::path& p) {
  std::string s = "'";
  for (char c : p.string()) s += c == '\'' ? std::string("''") : std::string(1, c);
  return s + "'";
}

std::string PlotScript(const std::filesystem::path& dir, const SimResult& r,
                       const RunInfo& info) {
  const std::string title =
      info.policy + " on " + std::filesystem::path(info.cluster).filename().string();
  std::string gp = "set terminal pngcairo noenhanced size 960,540\nset datafile separator ','\n"
                   "set key autotitle columnhead\nset grid\n";
  if (!r.allocation.curve.empty()) {
    gp += "set output " + Quote(dir / "allocation.png") + "\n";
    gp += "set title 'GPU allocation, " + title + " (placement " + info.placement + ")'\n";
    gp += "set xlabel 'arrived GPU requests'\nset ylabel 'GPUs'\n";
    gp += "plot " + Quote(dir / "allocation.csv") +
          " using 1:2 with lines lw 2 title 'allocated', '' using 1:($1-$2) with lines lw 2 "
          "title 'unallocated'\n";
    return gp;
  }
  gp += "set output " + Quote(dir / "utilization.png") + "\n";
  // A run where no task ever waited (a big cluster for its trace) has no queue axis: an
  // all-zero series would stretch it to [-1:1] and draw an empty axis.
  int64_t max_queued = 0;
  for (const UsageSample& s : r.usage) max_queued = std::max(max_queued, s.queued);
  gp += "set title 'Cluster use over time, " + title +
        (max_queued == 0 ? " (no task waited)" : "") + "'\n";
  gp += "set xlabel 'time (h)'\nset ylabel 'busy GPUs'\nset yrange [0:*]\n";
  if (max_queued == 0) {
    gp += "plot " + Quote(dir / "usage.csv") + " using ($1/3600):2 with steps title 'busy GPUs'\n";
  } else {
    gp += "set y2label 'queued tasks'\nset ytics nomirror\nset y2tics\nset y2range [0:*]\n";
    gp += "plot " + Quote(dir / "usage.csv") +
          " using ($1/3600):2 with steps title 'busy GPUs', '' using ($1/3600):6 axes x1y2 "
          "with steps title 'queued'\n";
    gp += "unset y2label\nunset y2tics\nset ytics mirror\n";
  }
  gp += "set autoscale y\n";
  gp += "set output " + Quote(dir / "jct_cdf.png") + "\n";
  gp += "set title 'JCT distribution, " + title + "'\nset logscale x\n"
        "set xlabel 'JCT (h)'\nset ylabel 'fraction of jobs'\n";
  gp += "plot " + Quote(dir / "jct_cdf.csv") + " using 1:2 with lines lw 2 title 'CDF'\n";
  return gp;
}

}  // namespace

Status WriteOutputs(const std::string& dir_name, const SimResult& r, const RunInfo& info,
                    std::string* warning) {
  namespace fs = std::filesystem;
  const fs::path dir(dir_name);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Unavailable("out: cannot create " + dir_name + ": " + ec.message());
  GS_RETURN_IF_ERROR(WriteFile(dir / "summary.json", "summary",
                               [&](std::ostream& o) { WriteJson(o, r, info); }));
  GS_RETURN_IF_ERROR(WriteFile(dir / "jobs.csv", "jobs", [&](std::ostream& o) { WriteJobsCsv(o, r); }));
  GS_RETURN_IF_ERROR(WriteFile(dir / "usage.csv", "usage", [&](std::ostream& o) { WriteUsageCsv(o, r); }));
  if (!r.allocation.curve.empty()) {
    GS_RETURN_IF_ERROR(WriteFile(dir / "allocation.csv", "allocation", [&](std::ostream& o) {
      o << "arrived_gpus,allocated_gpus\n";
      for (const AllocationPoint& p : r.allocation.curve) {
        o << p.arrived_gpus << ',' << p.allocated_gpus << '\n';
      }
    }));
  } else {
    GS_RETURN_IF_ERROR(WriteFile(dir / "jct_cdf.csv", "JCT CDF",
                                 [&](std::ostream& o) { WriteJctCdf(o, r); }));
  }
  const std::string script = PlotScript(fs::absolute(dir), r, info);
  GS_RETURN_IF_ERROR(WriteFile(dir / "plots.gp", "gnuplot script",
                               [&](std::ostream& o) { o << script; }));
  // gnuplot reads the script on its standard input; its messages go to ours.
  FILE* gp = popen("gnuplot 2>&1", "w");
  const bool ran = gp != nullptr && std::fwrite(script.data(), 1, script.size(), gp) == script.size();
  const int rc = gp != nullptr ? pclose(gp) : -1;
  if (!ran || rc != 0) {
    *warning = "plots: gnuplot failed or is not installed (apt-get install gnuplot-nox); "
               "the data and " + (dir / "plots.gp").string() + " are written";
  }
  return Status::Ok();
}

}  // namespace gpusched::sim
