// ringx-viewer: every rank's streams on one aligned timeline, from trace files or
// a running job. See options.h for the command line.
#include <cstdio>
#include <exception>

#include "backend/common/error.h"
#include "viewer/app/app.h"
#include "viewer/app/options.h"

int main(int argc, char** argv) {
  using namespace ringx::viewer;
  AppOptions options;
  try {
    options = parseOptions(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ringx-viewer: %s\n", e.what());
    return 2;
  }
  if (options.help) {
    std::fputs(usage().c_str(), stdout);
    return 0;
  }
  try {
    App app(options);
    return app.run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ringx-viewer: error: %s\n", e.what());
    return 1;
  }
}
