// libfabric's view of the node: which reliable-datagram providers with tagged messages (what the
// DiComm transport uses) exist, and on which NIC each one offers a domain.
#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

#include <algorithm>
#include <memory>

#include "nics_internal.hpp"

namespace h2::dicomm::detail {

namespace {

struct InfoDeleter {
  void operator()(fi_info* info) const { fi_freeinfo(info); }
};

}  // namespace

void discover_libfabric(NicDiscovery& discovery) {
  const uint32_t version = fi_version();
  discovery.libfabric_version = std::to_string(FI_MAJOR(version)) + "." + std::to_string(FI_MINOR(version));

  const std::unique_ptr<fi_info, InfoDeleter> hints(fi_allocinfo());
  if (!hints) {
    discovery.libfabric_status = "fi_allocinfo: out of memory";
    return;
  }
  hints->caps = FI_TAGGED;
  hints->ep_attr->type = FI_EP_RDM;
  // Discovery lists what exists, not what one transport configuration accepts: like fi_info, accept
  // every mode bit and memory-registration mode, so that providers which need FI_CONTEXT or
  // FI_MR_LOCAL (verbs, efa) are listed too. FI_MR_BASIC and FI_MR_SCALABLE are the pre-1.5 modes,
  // which may not be combined with the others.
  hints->mode = ~0ULL;
  hints->domain_attr->mode = ~0ULL;
  hints->domain_attr->mr_mode = ~(FI_MR_BASIC | FI_MR_SCALABLE);

  fi_info* raw = nullptr;
  const int rc = fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), nullptr, nullptr, 0, hints.get(), &raw);
  const std::unique_ptr<fi_info, InfoDeleter> infos(raw);
  if (rc != 0) {
    // -FI_ENODATA: no provider offers RDM + tagged here.
    discovery.libfabric_status = std::string("fi_getinfo: ") + fi_strerror(-rc);
    return;
  }
  for (const fi_info* info = raw; info != nullptr; info = info->next) {
    if (info->fabric_attr == nullptr || info->fabric_attr->prov_name == nullptr) continue;
    const std::string provider = info->fabric_attr->prov_name;
    if (std::find(discovery.providers.begin(), discovery.providers.end(), provider) == discovery.providers.end())
      discovery.providers.push_back(provider);
    if (info->domain_attr != nullptr && info->domain_attr->name != nullptr)
      attach_provider(discovery.nics, info->domain_attr->name, provider);
  }
  if (discovery.providers.empty()) discovery.libfabric_status = "fi_getinfo: no provider named itself";
}

}  // namespace h2::dicomm::detail
