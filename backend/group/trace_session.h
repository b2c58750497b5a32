// A traced job, as one rank sees it: turning tracing on and off for the
// process, and the parts that need the other ranks.
//
//   RINGX_TRACE_DIR=DIR          every rank records to DIR/rank-N.ringx; rank 0
//                                writes DIR/manifest.json (world size, hosts, start)
//   RINGX_TRACE_LISTEN=HOST:PORT the live server (rank 0 on PORT, the others on
//                                ephemeral ports it lists); see trace/live_server.h
//   RINGX_TRACE_TOKEN            required by the live server off loopback
//   RINGX_TRACE_RSS_MS           RSS sampling period (default 10, 0 = off)
//   RINGX_TRACE_FLUSH_MS         how often events go to the files and live clients (10)
//   RINGX_TRACE_CLOCK_SYNC_MS    clock-offset measurement period (default 10000)
//
// The first ringx process group of a process (the default group) starts the
// session when the environment asks for it; ringx.trace.start()/stop() do the
// same from code. Starting is collective: every rank of the group must do it,
// because ranks exchange hosts, live addresses and clock connections through
// the group's store.
#pragma once

#include <chrono>
#include <string>

#include "backend/store/store.h"

namespace ringx {

struct TraceConfig {
  std::string dir;
  std::string listen;
  std::string token;
  int rssIntervalMs = 10;
  int flushIntervalMs = 10;
  int clockSyncIntervalMs = 10000;
  bool enabled() const { return !dir.empty() || !listen.empty(); }
};

// Reads the RINGX_TRACE_* variables above (clear errors for malformed values).
TraceConfig traceConfigFromEnvironment();

class TraceSession {
 public:
  // Starts recording this process as `rank` of `size`. `token` authenticates
  // the clock connections (the group's token). Throws InvalidArgument when a
  // session is already running, IoError when DIR cannot be created.
  static void start(const TraceConfig& config, Store& store, int rank, int size,
                    const std::string& token, std::chrono::milliseconds timeout);
  // Flushes and closes everything; a no-op when no session runs.
  static void stop();
  static bool active();
  // The live server's address on this rank ("" without one).
  static std::string liveAddress();
};

}  // namespace ringx
