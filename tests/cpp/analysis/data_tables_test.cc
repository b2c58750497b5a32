// The trace as tables (analysis/data_tables.h) and the delimited text they are written in
// (base/delimited_text.h), on a store whose every row is written out here.
#include "analysis/data_tables.h"

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "tests/cpp/trace/model/sample_store.h"

namespace ringx::analysis {
namespace {

using model::testing::addInstant;
using model::testing::addSpan;

TEST(DelimitedText, QuotesWhatCsvMustAndFlattensWhatTsvCannotHold) {
  std::ostringstream csv, tsv;
  for (auto [out, delimiter] : {std::pair{&csv, Delimiter::kCsv}, {&tsv, Delimiter::kTsv}}) {
    DelimitedWriter row(*out, delimiter);
    row.field("plain").field("a,b").field("say \"hi\"").field("two\nlines").field("tab\there");
    row.endRow();
    row.field(int64_t{-3}).field(0.1).field(1e300).empty().field(std::nan("")).endRow();
  }
  EXPECT_EQ(csv.str(),
            "plain,\"a,b\",\"say \"\"hi\"\"\",\"two\nlines\",tab\there\n"
            "-3,0.1,1e+300,,\n");
  EXPECT_EQ(tsv.str(),
            "plain\ta,b\tsay \"hi\"\ttwo lines\ttab here\n"
            "-3\t0.1\t1e+300\t\t\n");
}

// Two ranks: an allreduce (group "world", seq 4, 1024 bytes) that rank 1 reaches 30 ns after
// rank 0, a compute span with a "name" argument (a column already), an instant, a counter.
model::TraceStore twoRanks() {
  model::TraceStore store;
  addSpan(store, 0, "comm:world", "collective", "allreduce", 100, 200,
          {{"seq", 4}, {"bytes", 1024}, {"group_rank", 0}, {"group_size", 2}},
          {{"group", "world"}});
  addSpan(store, 1, "comm:world", "collective", "allreduce", 130, 200,
          {{"seq", 4}, {"bytes", 1024}, {"group_rank", 1}, {"group_size", 2}},
          {{"group", "world"}});
  addSpan(store, 0, "main", "user", "forward", 10, 90, {}, {{"name", "layer, one"}});
  addInstant(store, 1, "main", "user", "mark", 50, {{"step", 7}});
  store.addCounter(store.rank(0), "rss_bytes", 60, 4096);
  store.finalize();
  return store;
}

TEST(DataTables, EventsARowEachInTimeOrderArgumentsAsColumns) {
  std::ostringstream out;
  writeEventTable(twoRanks(), out, Delimiter::kCsv);
  EXPECT_EQ(out.str(),
            "rank,track,kind,category,name,begin_ns,end_ns,duration_ns,failed,bytes,group,"
            "group_rank,group_size,arg:name,seq,step\n"
            "0,main,span,user,forward,10,90,80,0,,,,,\"layer, one\",,\n"
            "0,comm:world,span,collective,allreduce,100,200,100,0,1024,world,0,2,,4,\n"
            "1,main,instant,user,mark,50,50,0,0,,,,,,,7\n"
            "1,comm:world,span,collective,allreduce,130,200,70,0,1024,world,1,2,,4,\n");
}

TEST(DataTables, CollectivesARowPerRanksPartWithTheMatchedFigures) {
  std::ostringstream out;
  writeCollectiveTable(twoRanks(), out, Delimiter::kCsv);
  std::istringstream lines(out.str());
  std::string header, first, second;
  std::getline(lines, header);
  std::getline(lines, first);
  std::getline(lines, second);
  EXPECT_EQ(header,
            "group,seq,op,bytes,group_size,rank,group_rank,begin_ns,end_ns,duration_ns,busbw_gbps,"
            "failed,arrival_skew_ns,last_arrival_rank,slowest_rank,mismatch,missing_ranks");
  // busbw: allreduce's factor 2(n-1)/n = 1 at 2 ranks, 1024 bytes over 100 and 70 ns.
  EXPECT_EQ(first, "world,4,allreduce,1024,2,0,0,100,200,100,10.24,0,30,1,0,0,");
  EXPECT_EQ(second.substr(0, second.find(",14.6")), "world,4,allreduce,1024,2,1,1,130,200,70");
  EXPECT_NE(second.find(",0,30,1,0,0,"), std::string::npos) << second;
}

TEST(DataTables, CountersARowPerSample) {
  std::ostringstream out;
  writeCounterTable(twoRanks(), out, Delimiter::kCsv);
  EXPECT_EQ(out.str(), "rank,counter,time_ns,value\n0,rss_bytes,60,4096\n");
}

}  // namespace
}  // namespace ringx::analysis
