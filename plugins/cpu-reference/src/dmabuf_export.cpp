#include "dmabuf_export.hpp"

#include <fcntl.h>
#include <linux/udmabuf.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common.hpp"

namespace h2::cpu_reference {

namespace {

constexpr const char* kDevice = "/dev/udmabuf";

}  // namespace

bool udmabuf_available() {
  return access(kDevice, R_OK | W_OK) == 0;
}

int create_udmabuf(int memfd, size_t offset, size_t bytes) {
  const int device = open(kDevice, O_RDWR | O_CLOEXEC);
  if (device < 0)
    fail(H2_STATUS_UNSUPPORTED, std::string("cannot open ") + kDevice + " (" + std::strerror(errno) +
                                    "): the kernel's udmabuf module makes cpu-reference memory a dma-buf "
                                    "(modprobe udmabuf, and give the process the device)");
  udmabuf_create request{};
  request.memfd = static_cast<__u32>(memfd);
  request.flags = UDMABUF_FLAGS_CLOEXEC;
  request.offset = offset;
  request.size = bytes;
  const int fd = ioctl(device, UDMABUF_CREATE, &request);
  const int error = errno;
  close(device);
  if (fd < 0)
    fail(H2_STATUS_UNSUPPORTED,
         "udmabuf refused " + std::to_string(bytes) + " bytes at arena offset " + std::to_string(offset) + " (" +
             std::strerror(error) +
             (error == EINVAL ? ": above the module's size_limit_mb, or an unsealed memfd" : "") + ")");
  return fd;
}

}  // namespace h2::cpu_reference
