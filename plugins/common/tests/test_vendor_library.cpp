// Loading a vendor runtime at run time: found in a home directory or on the loader's path, a
// missing library or function named with the hint, never a crash.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <functional>

#include "plugin_error.hpp"
#include "vendor_library.hpp"

namespace h2::plugin {
namespace {

using testing::HasSubstr;

// libm stands in for a vendor runtime: every machine has it, on the loader's path.
VendorSearch libm_search() {
  return {"libm.so.6", {"H2_TEST_VENDOR_HOME"}, {"lib64", "lib"}, "install the test runtime"};
}

H2_Status status_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const PluginError& e) {
    return e.status();
  }
  return H2_STATUS_OK;
}

TEST(VendorLibrary, FindsALibraryOnTheLoadersPathAndResolvesItsFunctions) {
  unsetenv("H2_TEST_VENDOR_HOME");
  VendorLibrary libm(libm_search());
  EXPECT_EQ(libm.path(), "libm.so.6");
  auto cosine = libm.function<double (*)(double)>("cos");
  EXPECT_EQ(cosine(0.0), 1.0);
}

TEST(VendorLibrary, PrefersTheHomeDirectoryOfTheVariable) {
  const std::filesystem::path home = std::filesystem::temp_directory_path() / "h2-test-vendor-home";
  std::filesystem::remove_all(home);
  std::filesystem::create_directories(home / "lib64");
  const char* libm_path = "/lib/x86_64-linux-gnu/libm.so.6";
  if (!std::filesystem::exists(libm_path)) GTEST_SKIP() << "no " << libm_path << " to copy";
  std::filesystem::copy_file(libm_path, home / "lib64" / "libm.so.6");
  setenv("H2_TEST_VENDOR_HOME", home.c_str(), 1);
  VendorLibrary libm(libm_search());
  EXPECT_EQ(libm.path(), (home / "lib64" / "libm.so.6").string());
  unsetenv("H2_TEST_VENDOR_HOME");
  std::filesystem::remove_all(home);
}

TEST(VendorLibrary, AMissingLibraryIsRuntimeMissingSayingWhereItLookedAndHowToInstall) {
  setenv("H2_TEST_VENDOR_HOME", "/nonexistent/vendor", 1);
  VendorSearch search = libm_search();
  search.file = "libh2-absent-vendor-runtime.so";
  try {
    VendorLibrary absent(search);
    FAIL() << "an absent library loaded";
  } catch (const PluginError& e) {
    EXPECT_EQ(e.status(), H2_STATUS_RUNTIME_MISSING);
    EXPECT_THAT(e.what(), HasSubstr("vendor runtime missing: libh2-absent-vendor-runtime.so was not found"));
    EXPECT_THAT(e.what(), HasSubstr("/nonexistent/vendor/lib64 (H2_TEST_VENDOR_HOME)"));
    EXPECT_THAT(e.what(), HasSubstr("; install the test runtime"));
  }
  unsetenv("H2_TEST_VENDOR_HOME");
}

TEST(VendorLibrary, AMissingFunctionNamesItAndTheLibrary) {
  VendorLibrary libm(libm_search());
  EXPECT_EQ(status_of([&] { libm.function<void (*)()>("aclrtMalloc"); }), H2_STATUS_RUNTIME_MISSING);
  EXPECT_THAT([&] { libm.function<void (*)()>("aclrtMalloc"); },
              testing::ThrowsMessage<PluginError>(HasSubstr("vendor runtime libm.so.6 has no function aclrtMalloc")));
}

}  // namespace
}  // namespace h2::plugin
