// `tandem train --num-workers auto --prefetch auto` on the command line: "auto" is accepted for
// both flags (the run then fails only on its data folder), other words and out-of-range
// numbers are refused naming the flag.
#include <gtest/gtest.h>

#include "train/run_tandem.h"

using tandem::testing::CmdResult;
using tandem::testing::last_line;
using tandem::testing::run_tandem;

TEST(CliAuto, AutoIsAcceptedForWorkersAndPrefetch) {
  const CmdResult r = run_tandem("train --num-workers auto --prefetch auto --data /nonexistent-tandem-dir");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("/nonexistent-tandem-dir"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("--num-workers"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("--prefetch"), std::string::npos) << r.out;
  const CmdResult r2 = run_tandem("train --prefetch-factor auto --data /nonexistent-tandem-dir");
  EXPECT_NE(r2.out.find("/nonexistent-tandem-dir"), std::string::npos) << r2.out;
}

TEST(CliAuto, OtherValuesAreRefusedNamingTheFlag) {
  const CmdResult a = run_tandem("train --num-workers -2 --data /nonexistent-tandem-dir");
  EXPECT_EQ(a.exit_code, 2) << a.out;
  EXPECT_NE(last_line(a.out).find("--num-workers: expected 0..256 or auto, got -2"), std::string::npos) << a.out;
  const CmdResult b = run_tandem("train --prefetch 0 --data /nonexistent-tandem-dir");
  EXPECT_EQ(b.exit_code, 2) << b.out;
  EXPECT_NE(last_line(b.out).find("--prefetch/--prefetch-factor: expected 1..64 or auto, got 0"),
            std::string::npos)
      << b.out;
  const CmdResult c = run_tandem("train --num-workers many --data /nonexistent-tandem-dir");
  EXPECT_EQ(c.exit_code, 2) << c.out;
  EXPECT_NE(c.out.find("--num-workers"), std::string::npos) << c.out;
}
