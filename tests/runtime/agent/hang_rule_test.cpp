// The hang rule (agent/hang_rule.hpp) on observed heartbeats: a worker that never beat, or whose
// file went away, is never hung; the limit is the floor until the beats show their own rhythm,
// then 10x the longest gap; a silent worker is hung only past its limit, and the reason names the
// silence, the limit and the last step.

#include "runtime/agent/hang_rule.hpp"

#include <gtest/gtest.h>

namespace stretch::agent {
namespace {

using namespace std::chrono_literals;

constexpr Time at(double seconds) {
  return std::chrono::duration_cast<Time>(std::chrono::duration<double>(seconds));
}

HangPolicy policy(Duration floor) {
  HangPolicy p;
  p.floor = floor;
  return p;
}

TEST(HangRule, AWorkerThatNeverBeatIsNeverHung) {
  HeartbeatTracker beats;
  beats.observe(std::nullopt, std::nullopt, at(0));
  EXPECT_FALSE(beats.started());
  EXPECT_FALSE(beats.hung(policy(2s), at(3600)));
}

TEST(HangRule, ASilentWorkerIsHungPastTheFloorAndTheReasonSaysWhy) {
  HeartbeatTracker beats;
  beats.observe(100, 7, at(10));
  beats.observe(100, 7, at(11.9));  // the same stamp: no beat
  EXPECT_FALSE(beats.hung(policy(2s), at(11.9)));
  EXPECT_FALSE(beats.hung(policy(2s), at(12.0)));
  const auto why = beats.hung(policy(2s), at(12.5));
  ASSERT_TRUE(why);
  EXPECT_EQ(*why, "no heartbeat for 2.5 s (limit 2 s), last step 7");
}

TEST(HangRule, TheLimitGrowsToTenTimesTheLongestGapBetweenBeats) {
  HeartbeatTracker beats;
  beats.observe(1, 0, at(0));
  beats.observe(2, 1, at(1));  // gap 1 s: the floor (30 s) rules
  EXPECT_EQ(beats.limit(policy(30s)), 30s);
  beats.observe(3, 2, at(41));  // a 40 s evaluation: 400 s
  EXPECT_EQ(beats.limit(policy(30s)), 400s);
  EXPECT_FALSE(beats.hung(policy(30s), at(41 + 399)));
  EXPECT_TRUE(beats.hung(policy(30s), at(41 + 401)));
  beats.observe(4, 3, at(42));  // the longest gap stays
  EXPECT_EQ(beats.limit(policy(30s)), 400s);
}

// `stretch launch --hang_timeout 2` once meant about 10.6 s: the engine beats every ~1.06 s and
// the limit grew to 10x that. A limit the user gave is the limit, whatever the beats' rhythm.
TEST(HangRule, ALimitTheUserGaveIsTheLimitWhateverTheGapsBetweenBeats) {
  HangPolicy given = policy(2s);
  given.fixed = true;
  HeartbeatTracker beats;
  beats.observe(1, 0, at(0));
  beats.observe(2, 1, at(1.06));
  beats.observe(3, 42, at(2.12));
  EXPECT_EQ(beats.limit(given), 2s);
  EXPECT_EQ(beats.limit(policy(2s)), std::chrono::duration_cast<Duration>(10.6s));  // derived
  EXPECT_FALSE(beats.hung(given, at(4.12)));
  const auto why = beats.hung(given, at(4.2));
  ASSERT_TRUE(why);
  EXPECT_EQ(*why, "no heartbeat for 2.08 s (limit 2 s), last step 42");
  beats.observe(4, 43, at(60));  // a 58 s gap: still 2 s
  EXPECT_EQ(beats.limit(given), 2s);
}

TEST(HangRule, AFileThatGoesAwayEndsTheWatchUntilItIsWrittenAgain) {
  HeartbeatTracker beats;
  beats.observe(1, 40, at(0));
  beats.observe(std::nullopt, std::nullopt, at(1));  // the engine ended: the file is gone
  EXPECT_FALSE(beats.started());
  EXPECT_FALSE(beats.hung(policy(2s), at(100)));
  beats.observe(2, 0, at(100));  // a new engine beats again
  EXPECT_TRUE(beats.started());
  EXPECT_FALSE(beats.hung(policy(2s), at(101)));
  EXPECT_TRUE(beats.hung(policy(2s), at(103)));
}

TEST(HangRule, AWorkerAdvancedWhenItsFileSaysItCompletedAStepOrItsStepChanged) {
  HeartbeatTracker engine;  // "STEP COMPLETED": the first observation may already say 1
  engine.observe(1, 201, at(0), 0);
  EXPECT_FALSE(engine.advanced());
  engine.observe(2, 201, at(1), 1);
  EXPECT_TRUE(engine.advanced());
  HeartbeatTracker script;  // only "STEP"
  script.observe(1, 200, at(0));
  script.observe(2, 200, at(1));
  EXPECT_FALSE(script.advanced());
  script.observe(3, 201, at(2));
  EXPECT_TRUE(script.advanced());
}

TEST(HangRule, AZeroFloorTurnsDetectionOff) {
  HeartbeatTracker beats;
  beats.observe(1, 0, at(0));
  EXPECT_FALSE(policy(0s).enabled());
  EXPECT_FALSE(beats.hung(policy(0s), at(1e6)));
}

}  // namespace
}  // namespace stretch::agent
