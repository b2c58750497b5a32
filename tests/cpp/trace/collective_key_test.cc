// The collective key (trace/format/collective_key.h): which recorded span is one collective
// across the ranks of its group, and its (group, seq). Every matcher (collective chains, the
// model's aggregate lanes, the analyses' matching, the summary) goes through these, so a span
// counts the same way in ringx-trace, the viewer and the Chrome export.
#include <gtest/gtest.h>

#include <string>
#include <unordered_set>

#include "trace/format/collective_key.h"

namespace ringx::trace {
namespace {

TEST(CollectiveKey, PointToPointIsMatchedByPeerNotBySequence) {
  EXPECT_TRUE(isPointToPoint("send"));
  EXPECT_TRUE(isPointToPoint("recv_anysource"));
  EXPECT_TRUE(isPointToPoint("isend"));
  EXPECT_TRUE(isPointToPoint("irecv"));
  EXPECT_FALSE(isPointToPoint("reduce"));
  EXPECT_FALSE(isPointToPoint("reduce_scatter"));
  EXPECT_FALSE(isCollectiveAcrossRanks("send", 4, "world"));
  EXPECT_TRUE(isCollectiveAcrossRanks("allreduce", 4, "world"));
}

TEST(CollectiveKey, TheGroupIsTheArgumentElseTheCommTrackElseTheTrack) {
  EXPECT_EQ(collectiveGroup("1", "comm:world"), "1");
  EXPECT_EQ(collectiveGroup("", "comm:world"), "world");
  EXPECT_EQ(collectiveGroup("", "comm:"), "");
  // Recorded on another track (no "comm:" prefix): that track is its group.
  EXPECT_EQ(collectiveGroup("", "stream 7"), "stream 7");
}

TEST(CollectiveKey, KeyedOnlyWithASequenceNumberAndAGroup) {
  int asked = 0;
  auto idOf = [&](std::string_view group) {
    ++asked;
    return group == "world" ? 7u : 9u;
  };
  const auto key = collectiveKeyOf("allreduce", 12, "world", idOf);
  ASSERT_TRUE(key.has_value());
  EXPECT_EQ(key->group, 7u);
  EXPECT_EQ(key->seq, 12);
  EXPECT_EQ(asked, 1);
  EXPECT_FALSE(collectiveKeyOf("allreduce", -1, "world", idOf));  // no sequence number
  EXPECT_FALSE(collectiveKeyOf("allreduce", 3, "", idOf));        // no group
  EXPECT_FALSE(collectiveKeyOf("recv", 3, "world", idOf));        // point-to-point
  EXPECT_EQ(asked, 1);  // an id is asked for only for a key it makes
  EXPECT_EQ(*collectiveKeyOf("barrier", 0, "1", idOf), (CollectiveKey{9u, 0}));
}

TEST(CollectiveKey, DenseSequencesOfManyGroupsHashApart) {
  std::unordered_set<size_t> hashes;
  for (uint32_t group = 1; group <= 16; ++group)
    for (int64_t seq = 0; seq < 1000; ++seq) hashes.insert(CollectiveKeyHash{}({group, seq}));
  EXPECT_EQ(hashes.size(), 16000u);
}

}  // namespace
}  // namespace ringx::trace
