// Point-to-point: tags, any-source receives, messages that arrive before their
// receive is posted, size mismatches and peers that go away.
#include <gtest/gtest.h>

#include <future>
#include <set>

#include "tests/cpp/rank_threads.h"

namespace ringx {
namespace {

using testing::runGroup;

// Blocks until a callback-style operation completes; returns (error text, source).
struct Completion {
  std::promise<std::pair<std::string, int>> promise;
  PointToPoint::Callback callback() {
    return [this](std::exception_ptr error, int source) {
      std::string text;
      if (error) {
        try {
          std::rethrow_exception(error);
        } catch (const std::exception& e) {
          text = e.what();
        }
      }
      promise.set_value({text, source});
    };
  }
  std::pair<std::string, int> wait() { return promise.get_future().get(); }
};

TEST(PointToPoint, TagsMatchOutOfOrder) {
  runGroup(2, [](Group& group) {
    if (group.rank() == 0) {
      std::vector<int> a(1000, 1), b(10, 2);
      Completion sa, sb;
      group.p2p().send(1, 7, a.data(), a.size() * sizeof(int), sa.callback());
      group.p2p().send(1, 9, b.data(), b.size() * sizeof(int), sb.callback());
      EXPECT_EQ(sa.wait().first, "");
      EXPECT_EQ(sb.wait().first, "");
    } else {
      // Receive tag 9 first although tag 7 was sent first: 7 waits as unexpected.
      std::vector<int> b(10), a(1000);
      Completion rb, ra;
      group.p2p().recv(0, 9, b.data(), b.size() * sizeof(int), rb.callback());
      EXPECT_EQ(rb.wait(), std::make_pair(std::string(), 0));
      group.p2p().recv(0, 7, a.data(), a.size() * sizeof(int), ra.callback());
      EXPECT_EQ(ra.wait().first, "");
      EXPECT_EQ(a, std::vector<int>(1000, 1));
      EXPECT_EQ(b, std::vector<int>(10, 2));
    }
  });
}

TEST(PointToPoint, AnySourceReportsTheSender) {
  runGroup(4, [](Group& group) {
    if (group.rank() != 0) {
      int value = group.rank() * 100;
      Completion sent;
      group.p2p().send(0, 0, &value, sizeof(value), sent.callback());
      EXPECT_EQ(sent.wait().first, "");
      return;
    }
    std::set<int> sources;
    for (int i = 0; i < 3; ++i) {
      int value = -1;
      Completion got;
      group.p2p().recv(PointToPoint::kAnySource, 0, &value, sizeof(value), got.callback());
      auto [error, source] = got.wait();
      EXPECT_EQ(error, "");
      EXPECT_EQ(value, source * 100);
      sources.insert(source);
    }
    EXPECT_EQ(sources, (std::set<int>{1, 2, 3}));
  });
}

TEST(PointToPoint, BothSidesSendLargeMessagesFirst) {
  // Would deadlock if a send waited for the matching receive.
  runGroup(2, [](Group& group) {
    const size_t n = 8 << 20;
    std::vector<char> out(n, static_cast<char>(group.rank() + 1)), in(n);
    Completion sent, received;
    group.p2p().send(1 - group.rank(), 0, out.data(), n, sent.callback());
    group.p2p().recv(1 - group.rank(), 0, in.data(), n, received.callback());
    EXPECT_EQ(sent.wait().first, "");
    EXPECT_EQ(received.wait().first, "");
    EXPECT_EQ(in[n - 1], static_cast<char>(2 - group.rank()));
  });
}

TEST(PointToPoint, SizeMismatchIsAClearError) {
  runGroup(2, [](Group& group) {
    std::vector<char> data(group.rank() == 0 ? 16 : 32);
    Completion done;
    if (group.rank() == 0) {
      group.p2p().send(1, 3, data.data(), data.size(), done.callback());
      EXPECT_EQ(done.wait().first, "");
    } else {
      group.p2p().recv(0, 3, data.data(), data.size(), done.callback());
      std::string error = done.wait().first;
      EXPECT_NE(
          error.find("recv #0 from rank 0 (tag 3) on rank 1 expected 32 bytes but rank 0 sent 16"),
          std::string::npos)
          << error;
    }
  });
}

TEST(PointToPoint, ReceiveFromAndSendToADeadPeerFailNamingTheOperation) {
  auto store = std::make_shared<InMemoryStore>();
  testing::runThreads(2, [&](int rank) {
    auto group = std::make_unique<Group>(testing::testOptions(rank, 2, store));
    if (rank == 1) {
      group.reset();
      return;
    }
    int value;
    for (int seq = 0; seq < 2; ++seq) {  // one posted before the peer is gone, one after
      Completion done;
      group->p2p().recv(1, 5, &value, sizeof(value), done.callback());
      std::string error = done.wait().first;
      EXPECT_NE(error.find(strCat("ringx: recv #", seq, " from rank 1 (tag 5) failed on rank 0")),
                std::string::npos)
          << error;
    }
    for (int seq = 0; seq < 2; ++seq) {  // sends are numbered apart from receives, also from 0
      Completion done;
      group->p2p().send(1, 5, &value, sizeof(value), done.callback());
      std::string error = done.wait().first;
      EXPECT_NE(error.find(strCat("ringx: send #", seq, " to rank 1 (tag 5) failed on rank 0")),
                std::string::npos)
          << error;
    }
  });
}

TEST(PointToPoint, TrafficCountsThePayloadAndItsFrameHeader) {
  runGroup(2, [](Group& group) {
    std::vector<char> buffer(12345, 'x');
    const uint64_t before = group.traffic()[1].sent;  // [0] is the collective channel
    Completion done;
    if (group.rank() == 0) {
      group.p2p().send(1, 3, buffer.data(), buffer.size(), done.callback());
      EXPECT_EQ(done.wait().first, "");
      const ConnectionTraffic p2p = group.traffic()[1];
      EXPECT_EQ(p2p.channel, "p2p");
      EXPECT_EQ(p2p.peer, 1);
      // The frame header (magic, tag, size) travels with the payload.
      EXPECT_GT(p2p.sent - before, buffer.size());
      EXPECT_LE(p2p.sent - before, buffer.size() + 64);
    } else {
      group.p2p().recv(0, 3, buffer.data(), buffer.size(), done.callback());
      EXPECT_EQ(done.wait().first, "");
      EXPECT_GT(group.traffic()[1].received, buffer.size());
    }
  });
}

}  // namespace
}  // namespace ringx
