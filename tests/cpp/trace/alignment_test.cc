// Clock alignment: the reference rank, ranks without samples, interpolation
// between samples, clamping outside them, and sample clean-up.
#include <gtest/gtest.h>

#include "tests/cpp/trace/trace_fixture.h"
#include "trace/read/alignment.h"

namespace ringx::trace {
namespace {

TEST(ClockModel, ReferenceRankIsNeverShifted) {
  RankTrace rank0;
  rank0.header.rank = 0;
  rank0.clockSyncs.push_back(ClockSync{1000, 500, 10});  // ignored: rank 0 is the reference
  const ClockModel model = ClockModel::forRank(rank0);
  EXPECT_TRUE(model.isReference());
  EXPECT_TRUE(model.aligned());
  EXPECT_EQ(model.align(123456), 123456);
  EXPECT_EQ(model.offsetAt(1000), 0);
  EXPECT_EQ(model.maxUncertaintyNs(), 0);
}

TEST(ClockModel, RankWithoutSamplesIsUnaligned) {
  RankTrace rank1;
  rank1.header.rank = 1;
  const ClockModel model = ClockModel::forRank(rank1);
  EXPECT_FALSE(model.isReference());
  EXPECT_FALSE(model.aligned());
  EXPECT_EQ(model.align(777), 777);
  EXPECT_EQ(model.uncertaintyAt(777), 0);
}

TEST(ClockModel, SingleSampleIsAConstantOffset) {
  const ClockModel model({ClockSync{5000, -2000, 40}});
  EXPECT_TRUE(model.aligned());
  EXPECT_EQ(model.align(0), -2000);
  EXPECT_EQ(model.align(5000), 3000);
  EXPECT_EQ(model.align(1000000), 998000);
  EXPECT_EQ(model.uncertaintyAt(1), 40);
}

TEST(ClockModel, InterpolatesLinearlyBetweenSamples) {
  // The offset grows 1 us per ms of local time (1000 ppm drift), then shrinks.
  const ClockModel model({ClockSync{1000000, 5000, 100}, ClockSync{2000000, 6000, 300},
                          ClockSync{4000000, 4000, 100}});
  EXPECT_EQ(model.offsetAt(1000000), 5000);
  EXPECT_EQ(model.offsetAt(1500000), 5500);
  EXPECT_EQ(model.offsetAt(1250000), 5250);
  EXPECT_EQ(model.offsetAt(2000000), 6000);
  EXPECT_EQ(model.offsetAt(3000000), 5000);
  EXPECT_EQ(model.offsetAt(3999000), 4001);
  EXPECT_EQ(model.align(1500000), 1505500);
  EXPECT_EQ(model.uncertaintyAt(1500000), 200);
  EXPECT_EQ(model.uncertaintyAt(3000000), 200);
  EXPECT_EQ(model.maxUncertaintyNs(), 300);
}

TEST(ClockModel, ClampsToTheFirstAndLastSampleOutsideThem) {
  const ClockModel model({ClockSync{1000, 100, 7}, ClockSync{2000, 300, 9}});
  EXPECT_EQ(model.offsetAt(-1000000), 100);
  EXPECT_EQ(model.offsetAt(999), 100);
  EXPECT_EQ(model.offsetAt(2001), 300);
  EXPECT_EQ(model.offsetAt(int64_t{1} << 50), 300);
  EXPECT_EQ(model.uncertaintyAt(0), 7);
  EXPECT_EQ(model.uncertaintyAt(5000), 9);
}

TEST(ClockModel, SortsSamplesAndKeepsTheBestOfEqualTimes) {
  const ClockModel model({ClockSync{3000, 30, 1}, ClockSync{1000, 10, 50}, ClockSync{1000, 12, 5},
                          ClockSync{2000, 20, 1}});
  ASSERT_EQ(model.samples().size(), 3u);
  EXPECT_EQ(model.samples()[0].localNs, 1000);
  EXPECT_EQ(model.samples()[0].offsetNs, 12);  // uncertainty 5 beats 50
  EXPECT_EQ(model.offsetAt(1500), 16);
  EXPECT_EQ(model.offsetAt(2500), 25);
}

TEST(ClockModel, LargeTimesDoNotOverflow) {
  // Hours of steady clock and a millisecond-scale offset change.
  const int64_t hour = int64_t{3600} * 1000000000;
  const ClockModel model({ClockSync{hour, -5000000, 1000}, ClockSync{3 * hour, 5000000, 1000}});
  EXPECT_EQ(model.offsetAt(2 * hour), 0);
  EXPECT_EQ(model.align(2 * hour + 7), 2 * hour + 7);
}

TEST(ClockModel, ModelsFollowTheTracesOrder) {
  std::vector<RankTrace> ranks(3);
  for (int r = 0; r < 3; ++r) ranks[r].header.rank = r;
  ranks[1].clockSyncs.push_back(ClockSync{0, 42, 3});
  const std::vector<ClockModel> models = clockModels(ranks);
  ASSERT_EQ(models.size(), 3u);
  EXPECT_TRUE(models[0].isReference());
  EXPECT_EQ(models[1].offsetAt(0), 42);
  EXPECT_FALSE(models[2].aligned());
}

}  // namespace
}  // namespace ringx::trace
