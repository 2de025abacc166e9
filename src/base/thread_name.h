#pragma once
// Names the calling thread for top -H, perf and gdb ("gs-" + a role). Linux keeps at most 15
// characters; a longer name is cut. Best effort: a failure changes nothing else.

namespace gpusched {

void NameThisThread(const char* name);

}  // namespace gpusched
