// The conventions every ringx program's command line follows, on top of CLI11
// (Debian's libcli11-dev): ringx-trace, ringx-viewer and the C++ samples.
//
//  - --help lists every option a user may give (internal ones stay hidden);
//  - an error is one line that starts with the program's name and says what
//    was wrong, then where to look: "ringx-trace: TRACE is required" /
//    "run 'ringx-trace summary --help' for the options";
//  - exit status 0 after --help, 2 for a command line that makes no sense
//    (1 stays for inputs that cannot be read, as each program documents).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace ringx::cli {

// The program and subcommand path of `app`: "ringx-trace summary".
inline std::string commandPath(const CLI::App* app) {
  std::string path = app->get_name();
  for (const CLI::App* p = app->get_parent(); p != nullptr; p = p->get_parent())
    path = p->get_name() + " " + path;
  return path;
}

// Applies the conventions to `app` (subcommands added later inherit them).
inline void useConventions(CLI::App& app) {
  app.failure_message([](const CLI::App* failed, const CLI::Error& e) {
    const CLI::App* root = failed;
    while (root->get_parent() != nullptr) root = root->get_parent();
    return root->get_name() + ": " + e.what() + "\nrun '" + commandPath(failed) +
           " --help' for the options\n";
  });
}

// Parses argv: -1 to go on, else the exit status to return at once (0 after
// --help, 2 after an error; both already printed).
inline int parse(CLI::App& app, int argc, const char* const* argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  return -1;
}

}  // namespace ringx::cli
