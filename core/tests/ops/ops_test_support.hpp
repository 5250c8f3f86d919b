// A fixture for operator tests: a cpu-reference device and stream, tensors from host values, and
// comparisons with messages that show where values differ.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "../test_support.hpp"
#include "h2/h2.hpp"

namespace h2::test {

using Values = std::vector<double>;

class OpsTest : public testing::Test {
 protected:
  OpsTest()
      : runtime_(cpu_reference_only()),
        device_(runtime_.device("cpu-reference", 0)),
        stream_(device_.create_stream()) {}

  Tensor T(const Values& values, Shape shape, DType dtype = DType::f64) {
    return Tensor::from_host(stream_, values, std::move(shape), dtype);
  }
  Tensor empty(Shape shape, DType dtype = DType::f64) { return Tensor::empty(device_, std::move(shape), dtype); }
  Values host(const Tensor& t) { return t.to_host(stream_); }

  // Deterministic random values in [-1, 1).
  Values random(size_t n, uint32_t seed = 1) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<double> dist(-1, 1);
    Values v(n);
    for (double& x : v) x = dist(gen);
    return v;
  }

  Runtime runtime_;
  Device device_;
  Stream stream_;
};

// Element-wise |a - b| <= atol + rtol * |b|, NaNs equal; the message names the first mismatch.
inline testing::AssertionResult near(const Values& actual, const Values& expected, double rtol = 1e-12,
                                     double atol = 1e-12) {
  if (actual.size() != expected.size())
    return testing::AssertionFailure() << "sizes differ: " << actual.size() << " vs " << expected.size();
  for (size_t i = 0; i < actual.size(); ++i) {
    const double a = actual[i], e = expected[i];
    if (std::isnan(a) && std::isnan(e)) continue;
    if (a == e) continue;
    if (!(std::fabs(a - e) <= atol + rtol * std::fabs(e)))
      return testing::AssertionFailure() << "element " << i << ": " << a << " vs expected " << e << " (difference "
                                         << a - e << ")";
  }
  return testing::AssertionSuccess();
}

// Central finite differences of L(inputs) = sum(upstream * f(inputs)) with respect to inputs[which].
inline Values numeric_gradient(const std::function<Values(const std::vector<Values>&)>& f, std::vector<Values> inputs,
                               size_t which, const Values& upstream, double h = 1e-6) {
  Values gradient(inputs[which].size());
  auto loss = [&](const std::vector<Values>& in) {
    const Values out = f(in);
    double sum = 0;
    for (size_t i = 0; i < out.size(); ++i) sum += upstream[i] * out[i];
    return sum;
  };
  for (size_t i = 0; i < gradient.size(); ++i) {
    const double saved = inputs[which][i];
    inputs[which][i] = saved + h;
    const double plus = loss(inputs);
    inputs[which][i] = saved - h;
    const double minus = loss(inputs);
    inputs[which][i] = saved;
    gradient[i] = (plus - minus) / (2 * h);
  }
  return gradient;
}

}  // namespace h2::test
