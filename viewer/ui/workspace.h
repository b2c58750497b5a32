// The workspace: how a person arranged a trace (pinned, hidden and filtered tracks, the panel,
// the view), saved beside the trace and put back when it is opened again, as Perfetto's and
// Tracy's users keep theirs. JSON:
//   {"pinned": [{"rank": 0, "track": "comm:world"}], "hidden": [...], "filter": "bucket",
//    "panel": "collectives", "view_ns": [BEGIN, END]}   (view: from the trace's start)
#pragma once

#include <string>
#include <vector>

#include "trace/model/trace_store.h"
#include "viewer/ui/view_state.h"

namespace ringx::viewer {

// Where a trace's workspace goes: a trace directory's "ringx-workspace.json", beside the first
// file otherwise ("<file>.ringx-workspace.json"); "" for none (a live attach).
std::string workspacePath(const std::vector<std::string>& inputs);

// The workspace's text for `view` (the view relative to the store's start).
std::string workspaceText(const ViewState& view, const TraceStore& store);
// Writes it to `path` (through a temporary file and a rename); false when it cannot.
bool saveWorkspace(const std::string& path, const ViewState& view, const TraceStore& store);
// Puts a saved workspace back into `view`; false (and `view` untouched) when there is none or
// it does not parse; `error` says why when there was a file.
bool loadWorkspace(const std::string& path, ViewState& view, const TraceStore& store,
                   std::string* error);

}  // namespace ringx::viewer
