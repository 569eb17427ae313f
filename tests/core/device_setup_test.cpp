// configure_device and describe_devices: the device options and listing that the command line
// and `tandem info` use without naming a device kind.
#include <gtest/gtest.h>

#include "tandem/device.h"
#include "tandem/error.h"
#include "tandem/virt.h"

namespace tandem {
namespace {

TEST(DeviceSetup, VirtOptionsReachTheThrottle) {
  const VirtThrottle before = virt_throttle(3);
  configure_device(DeviceSpec::parse("virt:3?speed=0.25&bw=7&latency_us=11"));
  const VirtThrottle t = virt_throttle(3);
  EXPECT_DOUBLE_EQ(t.speed, 0.25);
  EXPECT_DOUBLE_EQ(t.bw_gbps, 7.0);
  EXPECT_DOUBLE_EQ(t.latency_us, 11.0);
  set_virt_throttle(3, before);
}

TEST(DeviceSetup, OtherKindsRefuseOptionsAndAcceptNone) {
  try {
    configure_device(DeviceSpec::parse("cpu?speed=2"));
    FAIL() << "options on cpu were accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_STREQ(e.what(), "[device] options are only accepted for virt devices");
  }
  EXPECT_THROW(configure_device(DeviceSpec::parse("cuda:0?bw=1")), Error);
  EXPECT_NO_THROW(configure_device(DeviceSpec::parse("cpu")));
  EXPECT_NO_THROW(configure_device(DeviceSpec::parse("cuda:0")));  // no options: nothing to check yet
}

TEST(DeviceSetup, CpuHasOnlyIndexZero) {
  EXPECT_TRUE(DeviceSpec::parse("cpu:0").device == Device());
  try {
    DeviceSpec::parse("cpu:1");
    FAIL() << "cpu:1 was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_STREQ(e.what(), "[device] cpu has one device: expected cpu or cpu:0, got 'cpu:1'");
  }
}

// Only the kinds the help lists: "gpu" is not another name for cuda.
TEST(DeviceSetup, UnknownKindsListTheKnownOnes) {
  for (const char* text : {"gpu", "gpu:0", "tpu"}) {
    try {
      DeviceSpec::parse(text);
      FAIL() << text << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
      EXPECT_EQ(std::string(e.what()), std::string("[device] unknown device '") + text +
                                           "': expected cpu, cuda[:N] or virt[:N][?key=value&...]");
    }
  }
}

TEST(DeviceSetup, VirtOptionErrorsComeFromItsRuntime) {
  EXPECT_THROW(configure_device(DeviceSpec::parse("virt:0?speed=0")), Error);
  EXPECT_THROW(configure_device(DeviceSpec::parse("virt:0?colour=red")), Error);
}

TEST(DeviceSetup, ListingNamesEveryKind) {
  const std::string s = describe_devices();
  EXPECT_EQ(s.rfind("  cpu\n", 0), 0u) << s;
  EXPECT_NE(s.find("  virt:0  allocated "), std::string::npos) << s;
  EXPECT_NE(s.find("  cuda"), std::string::npos) << s;  // a device line or why there is none
}

}  // namespace
}  // namespace tandem

namespace tandem {
namespace {

TEST(DeviceSetup, NegativeIndicesAndUnknownKindsAreRefused) {
  try {
    runtime_for(Device{DeviceKind::virt, -1});
    FAIL() << "virt:-1 was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("expected a device index >= 0"), std::string::npos) << e.what();
  }
  EXPECT_THROW(runtime(static_cast<DeviceKind>(7)), Error);
}

// A ':' or '?' with nothing after it is a typo, not the default index or no options.
TEST(DeviceSetup, EmptyIndexOrOptionsAreRefused) {
  for (const char* text : {"virt:", "virt:0?", "cuda:?", "cpu:"}) {
    try {
      DeviceSpec::parse(text);
      ADD_FAILURE() << text << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << text;
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(DeviceSpec::parse("virt:2?memory_mb=4").device.index, 2);
  EXPECT_EQ(DeviceSpec::parse("virt").device.index, 0);
}

}  // namespace
}  // namespace tandem
