// The trace event schema: the one contract between everything that writes events
// (the backend, the DDP and FSDP engines, user code) and everything that reads
// them (ringx-trace, the viewer, the live server's clients).
//
// A trace is a stream of records, the same bytes in a file and on a live socket
// (codec.h). Each rank writes its own stream; it opens with the file magic and a
// header record naming the rank, and then carries four kinds of records:
//
//   string      defines a string id (names, tracks, argument keys and string
//               values are ids, so a million events repeat no text)
//   event       a span (begin/end), an instant or a counter sample, with typed args
//   clock sync  this rank's clock offset to rank 0, measured while the job ran
//   dropped     how many events this stream lost (full buffers, slow live client)
//
// Times are nanoseconds of the rank's steady clock (CLOCK_MONOTONIC). Ranks on
// different hosts have unrelated clocks: a reader aligns them with the clock
// sync records (alignment.h), it never trusts wall-clock time.
//
// Changing anything in this file that changes the bytes on disk means bumping
// kSchemaVersion: tests/cpp/trace_schema_test.cc fails until you do, and readers
// refuse streams newer than they know.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ringx::trace {

// 2: DDP bucket names; 3: FSDP unit names; 4: device spans (a collective's GPU time);
// 5: DDP gradient readiness, bucket plans and backward's compute end (the what-if replay's input)
// 6: FSDP's schedule options ("fsdp_config" instants: the FSDP what-if replay's input)
// 7: which engine ran ("engine" on fsdp_config and bucket_plan: torch's own, watched, or
//    ringx's) and whether its collectives block the issuing thread ("blocking")
// 8: reduce_op is the op the caller asked (AVG, PREMUL_SUM with premul_factor), no longer the
//    SUM that ran them
inline constexpr uint32_t kSchemaVersion = 8;

// The first 8 bytes of every stream. "\n" and "\x1a" catch text-mode mangling.
inline constexpr char kMagic[8] = {'R', 'I', 'N', 'G', 'X', 'T', '\n', '\x1a'};

// Record framing: u32 little-endian length of (type + payload), u8 type, payload.
// Longer records than this are taken as corruption.
inline constexpr uint32_t kMaxRecordBytes = 16u << 20;

enum class RecordType : uint8_t {
  kHeader = 1,
  kString = 2,
  kEvent = 3,
  kClockSync = 4,
  kDropped = 5,
};

enum class EventKind : uint8_t {
  kSpan = 1,     // [beginNs, endNs]
  kInstant = 2,  // at beginNs
  kCounter = 3,  // `value` at beginNs (memory bytes, in-flight bytes, ...)
};

enum class Category : uint8_t {
  kCollective = 1,  // one collective on a communication thread
  kDdp = 2,         // DDP engine: buckets, forward/backward phases
  kFsdp = 3,        // FSDP engine: units, gathers, reduce-scatters
  kMemory = 4,      // counters: RSS, bucket/shard/gradient bytes
  kStep = 5,        // training-step markers
  kUser = 6,        // ringx.trace.span() and friends from user code
  kDevice = 7,      // work on a device's stream: a collective's kernel on cuda:comm
};
inline constexpr int kCategoryCount = 7;

enum class ArgType : uint8_t {
  kInt = 1,     // int64, zigzag varint on the wire
  kDouble = 2,  // IEEE double, 8 bytes little-endian
  kString = 3,  // a string id
};

// Names (lower case, stable: they appear in exported JSON and in the viewer).
const char* categoryName(Category category);
const char* eventKindName(EventKind kind);
// Parses categoryName()'s output; false for anything else.
bool parseCategory(std::string_view name, Category* out);

// Well-known argument keys. Producers may add others; readers show unknown keys as-is.
namespace arg {
// Collective size as nccl-tests counts it (busbw is derived by readers from it and
// the duration): allreduce, broadcast, reduce: the buffer; all_gather: the gathered
// output; reduce_scatter: the whole input; all_to_all: all bytes sent; gather,
// scatter: the root's whole buffer; send/recv: the message.
inline constexpr const char* kBytes = "bytes";
inline constexpr const char* kSeq = "seq";               // collective sequence number in its group
inline constexpr const char* kGroup = "group";           // process-group name ("world", "1", ...)
inline constexpr const char* kGroupRank = "group_rank";  // this rank's rank in that group
inline constexpr const char* kGroupSize = "group_size";
inline constexpr const char* kOp = "op";  // allreduce, broadcast, ...
// The reduce op the caller asked: SUM, MAX, ..., AVG and PREMUL_SUM (schema 8 on; before, the
// op the core ran: SUM for those two). PREMUL_SUM comes with its factor (a double).
inline constexpr const char* kReduceOp = "reduce_op";
inline constexpr const char* kPremulFactor = "premul_factor";
inline constexpr const char* kDtype = "dtype";
inline constexpr const char* kRoot = "root";  // root rank (group ranks) where there is one
inline constexpr const char* kAlgorithm = "algorithm";   // ring, direct, chain, ...
inline constexpr const char* kTransport = "transport";   // shm, tcp, shm+tcp
inline constexpr const char* kPeers = "peers";           // group ranks talked to, "1,2"
inline constexpr const char* kEnqueueNs = "enqueue_ns";  // when the caller issued it (steady ns)
inline constexpr const char* kError = "error";           // set when the collective failed
inline constexpr const char* kBucket = "bucket";         // DDP bucket index
inline constexpr const char* kUnit = "unit";             // FSDP unit (module path)
inline constexpr const char* kStep = "step";             // training step index
// DDP buckets (one span per bucket and iteration; times are steady ns like beginNs).
inline constexpr const char* kParams = "params";  // parameters in the bucket
inline constexpr const char* kFirstGradNs = "first_grad_ns";
inline constexpr const char* kReadyNs = "ready_ns";
inline constexpr const char* kLaunchNs = "launch_ns";
inline constexpr const char* kWireStartNs = "wire_start_ns";
inline constexpr const char* kWireEndNs = "wire_end_ns";
inline constexpr const char* kCopyBackNs = "copy_back_ns";  // copy-back began
inline constexpr const char* kExposedNs = "exposed_ns";     // comm time after backward compute
// DDP's backward span: when autograd finished computing (the rest is waiting and copy-back).
inline constexpr const char* kComputeEndNs = "compute_end_ns";
// DDP gradient readiness ("grad" instants on a bucket's track, on sampled steps): the
// parameter's index in registration order, its bytes, and its bucketing group ("float32@cpu").
inline constexpr const char* kParam = "param";
inline constexpr const char* kParamGroup = "param_group";
// DDP bucket plans ("bucket_plan" instants on "ddp" whenever buckets are built): the limits,
// gradient_as_bucket_view (0/1) and, for bucket_cap_mb="auto", why this plan was chosen.
inline constexpr const char* kBucketCapBytes = "bucket_cap_bytes";
inline constexpr const char* kFirstBucketBytes = "first_bucket_bytes";
inline constexpr const char* kBucketView = "gradient_as_bucket_view";
inline constexpr const char* kReason = "reason";
// FSDP units (exposed_ns on an all_gather: how long compute waited for it).
inline constexpr const char* kPhase = "phase";            // forward | backward
inline constexpr const char* kPrefetched = "prefetched";  // 1: issued ahead of need
inline constexpr const char* kIssueNs = "issue_ns";       // the collective was issued
// FSDP's schedule ("fsdp_config" instants on "fsdp", one per iteration as forward begins):
// the options by PyTorch's names, gather_lane (0/1: gathers on a group of their own) and the
// shard group's size (group_size).
inline constexpr const char* kShardingStrategy = "sharding_strategy";
inline constexpr const char* kBackwardPrefetch = "backward_prefetch";
inline constexpr const char* kForwardPrefetch = "forward_prefetch";
inline constexpr const char* kLimitAllGathers = "limit_all_gathers";
inline constexpr const char* kGatherLane = "gather_lane";
// Which engine recorded a "bucket_plan" or "fsdp_config": "ringx.ddp", "torch.ddp" (torch's
// DistributedDataParallel, watched), "ringx.fsdp", "torch.fsdp2" (fully_shard, watched).
inline constexpr const char* kEngine = "engine";
// 1 on "fsdp_config": every collective blocks the thread that issued it until it is done (FSDP2
// on CPU tensors: no streams to run them beside compute); 0 or absent: they run beside it.
inline constexpr const char* kBlocking = "blocking";
// Collectives on CUDA tensors: when the communication stream ran the collective's device work
// (CUDA events, on the host's steady clock).
inline constexpr const char* kGpuBeginNs = "gpu_begin_ns";
inline constexpr const char* kGpuEndNs = "gpu_end_ns";
// The arguments above that are steady-clock times (like beginNs, so readers align
// them with the event), as opposed to durations such as exposed_ns.
inline constexpr const char* kSteadyTimes[] = {kEnqueueNs,   kFirstGradNs, kReadyNs,     kLaunchNs,
                                               kWireStartNs, kWireEndNs,   kCopyBackNs,  kIssueNs,
                                               kGpuBeginNs,  kGpuEndNs,    kComputeEndNs};
bool isSteadyTime(std::string_view key);
}  // namespace arg

// Well-known tracks (lanes within a rank).
namespace track {
inline constexpr const char* kCompute = "compute";
inline constexpr const char* kCommPrefix = "comm:";            // + group name
inline constexpr const char* kDdp = "ddp";                     // forward/backward/optimizer spans
inline constexpr const char* kDdpBucketPrefix = "ddp:bucket";  // + bucket index
inline constexpr const char* kFsdp = "fsdp";                   // forward/backward/optimizer spans
inline constexpr const char* kFsdpUnitPrefix = "fsdp:";        // + unit module path
inline constexpr const char* kFsdpRootUnit = "(root)";         // the root module's unit path
inline constexpr const char* kSteps = "steps";
inline constexpr const char* kMemory = "memory";
inline constexpr const char* kUser = "user";
// The device work of this rank's collectives on CUDA tensors (Category::kDevice spans, named
// as the collective, with its seq and group), beside the comm: track of their host side.
inline constexpr const char* kCudaComm = "cuda:comm";
}  // namespace track

// Well-known counter names.
namespace counters {
inline constexpr const char* kRss = "rss_bytes";
inline constexpr const char* kDdpBucketBytes = "ddp.bucket_bytes";
inline constexpr const char* kFsdpShardedBytes = "fsdp.sharded_bytes";
inline constexpr const char* kFsdpUnshardedBytes = "fsdp.unsharded_bytes";
inline constexpr const char* kFsdpGradBytes = "fsdp.grad_bytes";
inline constexpr const char* kFsdpPeakBytes = "fsdp.peak_bytes";
}  // namespace counters

// ---- Decoded records (what codec.h reads and writes) -----------------------------

// The first record of every stream.
struct StreamHeader {
  uint32_t version = kSchemaVersion;
  int32_t rank = 0;
  int32_t worldSize = 1;
  int64_t pid = 0;
  std::string host;
  int64_t startSteadyNs = 0;  // steady clock when recording started
  int64_t startWallNs = 0;    // wall clock (Unix epoch ns) at the same moment; display only
};

// A typed argument. `key` and (for strings) `stringId` are string ids.
struct Arg {
  uint32_t key = 0;
  ArgType type = ArgType::kInt;
  int64_t intValue = 0;
  double doubleValue = 0;
  uint32_t stringId = 0;
};

// One event; its args are args[firstArg, firstArg + argCount) of the container
// that holds it (RankTrace, or the array handed to Encoder::event).
struct Event {
  EventKind kind = EventKind::kInstant;
  Category category = Category::kUser;
  int32_t rank = 0;
  uint32_t track = 0;  // string id
  uint32_t name = 0;   // string id
  int64_t beginNs = 0;
  int64_t endNs = 0;  // == beginNs for instants and counters
  double value = 0;   // counters only
  uint32_t firstArg = 0;
  uint32_t argCount = 0;
};

// This rank's clock against rank 0's, measured at localNs: rank 0's clock read
// localNs + offsetNs, give or take uncertaintyNs (half the best round trip).
struct ClockSync {
  int64_t localNs = 0;
  int64_t offsetNs = 0;
  int64_t uncertaintyNs = 0;
};

// `count` more events were lost (since the previous Dropped record of this
// stream) by localNs, and why: the recorder's buffers were full, or the live
// server shed events for a client that read too slowly.
struct Dropped {
  int64_t localNs = 0;
  uint64_t count = 0;
  uint32_t reason = 0;  // string id; 0 when unspecified
};

}  // namespace ringx::trace
