// ringx-viewer: every rank's streams on one aligned timeline, from trace files or
// a running job. See options.h for the command line.
#include <cstdio>
#include <exception>

#include "base/error.h"
#include "viewer/app/app.h"
#include "viewer/app/options.h"

int main(int argc, char** argv) {
  using namespace ringx::viewer;
  AppOptions options;
  if (const int status = parseOptions(argc, argv, &options); status >= 0) return status;
  try {
    App app(options);
    return app.run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ringx-viewer: error: %s\n", e.what());
    return 1;
  }
}
