// DiTorch's device on the plugin H2_TORCH_DEVICES names (meson runs it on cpu-reference and on the
// emulated Ascend and MLU devices): LibTorch tensors made on privateuseone hold H2 memory, round trip
// with the CPU and between dtypes and layouts, fill on the device, run other operators through the
// counted CPU fallback (an error under H2_TORCH_FALLBACK=error), and a device index that does not
// exist is a LibTorch error naming it.
#include <c10/core/Event.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdlib>

#include "h2torch/h2torch.hpp"

namespace {

using testing::HasSubstr;

const c10::Device kH2(c10::DeviceType::PrivateUse1, 0);

TEST(DiTorchDevice, TheDeviceIsTheOneH2TorchDevicesNames) {
  ASSERT_EQ(h2torch::device_count(), 1);
  const char* named = std::getenv("H2_TORCH_DEVICES");
  ASSERT_NE(named, nullptr) << "run through meson test, which names the device";
  EXPECT_EQ(h2torch::device(0).label(), named);
}

TEST(DiTorchDevice, TensorsRoundTripWithTheCpu) {
  const torch::Tensor cpu = torch::randn({4, 5});
  const torch::Tensor h2 = cpu.to(kH2);
  EXPECT_EQ(h2.device(), kH2);
  EXPECT_TRUE(torch::equal(h2.cpu(), cpu));
  EXPECT_GT(h2torch::memory_stats(0).allocations, 0u) << "the tensor's memory is not the caching allocator's";
}

TEST(DiTorchDevice, CopiesConvertDtypesAndLayoutsOnTheDevice) {
  const torch::Tensor cpu = torch::arange(12, torch::kFloat).reshape({3, 4});
  const torch::Tensor h2 = cpu.to(kH2);
  EXPECT_TRUE(torch::equal(h2.t().contiguous().cpu(), cpu.t().contiguous()));
  EXPECT_TRUE(torch::equal(h2.to(torch::kBFloat16).cpu(), cpu.to(torch::kBFloat16)));
  EXPECT_TRUE(torch::equal(h2.slice(1, 1, 3).cpu(), cpu.slice(1, 1, 3)));
  torch::Tensor strided = torch::zeros({4, 3}, kH2);
  strided.t().copy_(cpu);  // a CPU tensor into a transposed H2 view
  EXPECT_TRUE(torch::equal(strided.cpu(), cpu.t()));
}

TEST(DiTorchDevice, FillAndZeroRunOnTheDevice) {
  torch::Tensor h2 = torch::empty({2, 3}, kH2);
  h2.fill_(2.5);
  EXPECT_TRUE(torch::equal(h2.cpu(), torch::full({2, 3}, 2.5)));
  h2.zero_();
  EXPECT_TRUE(torch::equal(h2.cpu(), torch::zeros({2, 3})));
}

// add, sub, mul and div (broadcasting, alpha, a CPU scalar tensor, integer division promoting to
// float) and mm/addmm run on the device and match CPU LibTorch.
TEST(DiTorchDevice, ElementwiseAndMatrixProductsMatchCpuLibTorch) {
  const torch::Tensor a = torch::randn({4, 5}), b = torch::randn({1, 5}), m = torch::randn({5, 3});
  const torch::Tensor ha = a.to(kH2), hb = b.to(kH2), hm = m.to(kH2);
  const auto before = h2torch::fallback_counts();
  // An absolute tolerance of a few f32 ulps at 1: with alpha, a + alpha * b may round differently
  // from LibTorch's, and where the sum cancels to near 0 allclose's default 1e-8 took that last-bit
  // difference for a mismatch (5 of 300 random draws failed).
  const auto close = [](const torch::Tensor& x, const torch::Tensor& y) { return torch::allclose(x, y, 1e-5, 1e-6); };
  EXPECT_TRUE(close((ha + hb).cpu(), a + b));
  EXPECT_TRUE(close(torch::add(ha, hb, 2.5).cpu(), torch::add(a, b, 2.5)));
  EXPECT_TRUE(close((ha - hb).cpu(), a - b));
  EXPECT_TRUE(close((ha * hb).cpu(), a * b));
  EXPECT_TRUE(close((ha / (hb.abs() + 1)).cpu(), a / (b.abs() + 1)));
  EXPECT_TRUE(close((ha * torch::tensor(3.0)).cpu(), a * 3.0));
  EXPECT_TRUE(close(torch::sub(torch::tensor(2.0), hb, 3.0).cpu(), torch::sub(torch::tensor(2.0), b, 3.0)));
  const torch::Tensor i = torch::arange(6, torch::kLong);
  EXPECT_TRUE(torch::allclose((i.to(kH2) / i.to(kH2).add(1)).cpu(), i / (i + 1)));
  EXPECT_TRUE(torch::allclose(torch::mm(ha, hm).cpu(), torch::mm(a, m), 1e-5, 1e-6));
  const torch::Tensor bias = torch::randn({3});
  EXPECT_TRUE(torch::allclose(torch::addmm(bias.to(kH2), ha, hm, 0.5, 2.0).cpu(), torch::addmm(bias, a, m, 0.5, 2.0),
                              1e-5, 1e-6));
  const auto after = h2torch::fallback_counts();
  for (const char* op : {"aten::add.out", "aten::sub.out", "aten::mul.out", "aten::div.out", "aten::mm.out"}) {
    const auto count = [&](const std::map<std::string, int64_t>& c) { return c.count(op) ? c.at(op) : 0; };
    EXPECT_EQ(count(after), count(before)) << op << " fell back to the CPU";
  }
}

// LibTorch's events on the device: recorded on its stream, complete once the work before them has.
TEST(DiTorchDevice, EventsAndStreamsAreH2s) {
  const torch::Tensor h2 = torch::randn({64, 64}).to(kH2);
  c10::Event event(c10::DeviceType::PrivateUse1);
  const c10::Stream stream = c10::impl::getDeviceGuardImpl(c10::DeviceType::PrivateUse1)->getStream(kH2);
  (void)torch::mm(h2, h2);
  event.record(stream);
  event.block(stream);
  c10::impl::getDeviceGuardImpl(c10::DeviceType::PrivateUse1)->synchronizeStream(stream);
  EXPECT_TRUE(event.query());
  EXPECT_TRUE(c10::impl::getDeviceGuardImpl(c10::DeviceType::PrivateUse1)->queryStream(stream));
}

TEST(DiTorchDevice, MixingDevicesInOneOperatorIsNamed) {
  const torch::Tensor h2 = torch::ones({2}, kH2);
  try {
    (void)(h2 + torch::ones({2}));
    FAIL() << "an H2 and a CPU tensor were added";
  } catch (const c10::Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("add: expected all tensors on one H2 device, found cpu"));
  }
}

TEST(DiTorchDevice, OtherOperatorsRunThroughTheCountedCpuFallback) {
  const torch::Tensor cpu = torch::randn({3, 3});
  const torch::Tensor h2 = cpu.to(kH2);
  const torch::Tensor result = torch::cumsum(h2, 1);  // no H2 kernel
  EXPECT_EQ(result.device(), kH2);
  EXPECT_TRUE(torch::allclose(result.cpu(), torch::cumsum(cpu, 1)));
  EXPECT_GE(h2torch::fallback_counts()["aten::cumsum.out"], 1) << "cumsum did not go through the fallback";
  EXPECT_EQ(h2torch::fallback_counts().count("aten::_copy_from_and_resize"), 0u) << "the fallback's own copies";
}

TEST(DiTorchDevice, ForbiddenFallbackIsAnErrorNamingTheOperator) {
  const torch::Tensor h2 = torch::ones({2}, kH2);
  setenv("H2_TORCH_FALLBACK", "error", 1);
  try {
    (void)torch::cumsum(h2, 0);
    unsetenv("H2_TORCH_FALLBACK");
    FAIL() << "the fallback ran";
  } catch (const c10::Error& e) {
    unsetenv("H2_TORCH_FALLBACK");
    EXPECT_THAT(e.what(), HasSubstr("aten::cumsum.out has no H2 kernel, and H2_TORCH_FALLBACK=error forbids"));
  }
}

TEST(DiTorchDevice, ADeviceIndexThatDoesNotExistIsNamed) {
  try {
    (void)torch::empty({2}, c10::Device(c10::DeviceType::PrivateUse1, 7));
    FAIL() << "a tensor was made on a device that does not exist";
  } catch (const c10::Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("privateuseone:7 does not exist"));
  }
}

}  // namespace
