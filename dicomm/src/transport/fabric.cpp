#include "fabric.hpp"

#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "common/unique_name.hpp"
#include "h2/error.hpp"

namespace h2::dicomm::detail {

namespace {

// The libfabric API this code is written against; 1.14 is the oldest Debian/Ubuntu ship today.
constexpr uint32_t kApiVersion = FI_VERSION(1, 14);

[[noreturn]] void fail(const Network& network, const char* call, ssize_t code) {
  throw Error(H2_STATUS_INTERNAL,
              "DiComm: " + std::string(call) + " on " + network.describe() + " failed: " + Fabric::error_text(code));
}

// Hints for what DiComm needs: reliable datagrams, tagged messages delivered in send order between
// two ranks (collectives rely on it for the pieces of one step), manual progress is fine.
// `network` narrows them to its provider, where given.
fi_info* make_hints(const Network& network) {
  fi_info* hints = fi_allocinfo();
  if (hints == nullptr) throw Error(H2_STATUS_OUT_OF_MEMORY, "DiComm: fi_allocinfo failed");
  hints->caps = FI_TAGGED | FI_MSG;
  hints->ep_attr->type = FI_EP_RDM;
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  hints->tx_attr->msg_order = FI_ORDER_SAS;
  hints->rx_attr->msg_order = FI_ORDER_SAS;
  // Registration modes DiComm copes with (verbs and efa need FI_MR_LOCAL; tcp and shm need none).
  hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  hints->domain_attr->threading = FI_THREAD_DOMAIN;
  // Not the fabric and domain names: ofi_rxm over tcp (1.17) ignores them and lists every
  // interface, the first one first. Fabric() picks the network's entry from the list itself.
  if (!network.provider.empty()) hints->fabric_attr->prov_name = strdup(network.provider.c_str());
  return hints;
}

}  // namespace

std::string Fabric::error_text(ssize_t code) {
  return std::string(fi_strerror(static_cast<int>(code < 0 ? -code : code))) + " (" + std::to_string(code) + ")";
}

size_t default_message_bytes(const std::string& provider) {
  return provider.find("ofi_rxm") != std::string::npos ? size_t{512} << 10 : 0;
}

ProviderProbe probe_providers() {
  ProviderProbe probe;
  const uint32_t version = fi_version();
  probe.libfabric_version = std::to_string(FI_MAJOR(version)) + "." + std::to_string(FI_MINOR(version));
  fi_info* hints = make_hints(Network{});
  fi_info* list = nullptr;
  if (fi_getinfo(kApiVersion, nullptr, nullptr, 0, hints, &list) == 0) {
    for (fi_info* i = list; i != nullptr; i = i->next) {
      Network network;
      network.provider = i->fabric_attr->prov_name != nullptr ? i->fabric_attr->prov_name : "";
      network.fabric = i->fabric_attr->name != nullptr ? i->fabric_attr->name : "";
      network.domain = i->domain_attr->name != nullptr ? i->domain_attr->name : "";
      const auto same = [&](const Network& n) {
        return n.provider == network.provider && n.fabric == network.fabric && n.domain == network.domain;
      };
      if (std::none_of(probe.networks.begin(), probe.networks.end(), same)) probe.networks.push_back(network);
    }
    fi_freeinfo(list);
  }
  fi_freeinfo(hints);
  return probe;
}

Fabric::Fabric(const Network& network) : network_(network) {
  fi_info* hints = make_hints(network);
  fi_info* list = nullptr;
  int rc = fi_getinfo(kApiVersion, nullptr, nullptr, 0, hints, &list);
  fi_freeinfo(hints);
  // Socket providers offer one entry per interface and address family: the network's, by name.
  auto named = [](const char* name, const std::string& wanted) {
    return wanted.empty() || (name != nullptr && wanted == name);
  };
  for (fi_info* i = rc == 0 ? list : nullptr; i != nullptr && info_ == nullptr; i = i->next)
    if (named(i->fabric_attr->name, network.fabric) && named(i->domain_attr->name, network.domain))
      info_ = fi_dupinfo(i);
  if (list != nullptr) fi_freeinfo(list);
  if (rc == 0 && info_ == nullptr) rc = -FI_ENODATA;
  if (rc != 0 || info_ == nullptr)
    throw Error(H2_STATUS_UNSUPPORTED, "DiComm: libfabric provider '" + network.provider +
                                           "' offers no reliable-datagram endpoint with tagged messages" +
                                           (network.domain.empty() ? "" : " on '" + network.domain + "'") +
                                           (network.fabric.empty() ? "" : " (fabric " + network.fabric + ")") + ": " +
                                           error_text(rc) + " (see `fi_info -l`; H2_FABRIC_PROVIDER overrides)");
  mr_local_ = (info_->domain_attr->mr_mode & FI_MR_LOCAL) != 0;
  cq_data_size_ = info_->domain_attr->cq_data_size;
  const bool shm = std::strcmp(info_->fabric_attr->prov_name, "shm") == 0;
  if (shm) name_shm_region();

  ssize_t rc2 = fi_fabric(info_->fabric_attr, &fabric_, nullptr);
  if (rc2 != 0) fail(network_, "fi_fabric", rc2);
  rc2 = fi_domain(fabric_, info_, &domain_, nullptr);
  if (rc2 != 0) fail(network_, "fi_domain", rc2);

  fi_cq_attr cq_attr{};
  cq_attr.format = FI_CQ_FORMAT_TAGGED;
  cq_attr.wait_obj = FI_WAIT_NONE;  // DiComm polls; blocking reads hang shm in 1.17 (notes §2.4.2)
  cq_attr.size = 4096;
  rc2 = fi_cq_open(domain_, &cq_attr, &cq_, nullptr);
  if (rc2 != 0) fail(network_, "fi_cq_open", rc2);

  fi_av_attr av_attr{};
  av_attr.type = FI_AV_TABLE;
  rc2 = fi_av_open(domain_, &av_attr, &av_, nullptr);
  if (rc2 != 0) fail(network_, "fi_av_open", rc2);

  rc2 = fi_endpoint(domain_, info_, &ep_, nullptr);
  if (rc2 != 0) fail(network_, "fi_endpoint", rc2);
  rc2 = fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV);
  if (rc2 != 0) fail(network_, "fi_ep_bind(cq)", rc2);
  rc2 = fi_ep_bind(ep_, &av_->fid, 0);
  if (rc2 != 0) fail(network_, "fi_ep_bind(av)", rc2);
  rc2 = fi_enable(ep_);
  if (rc2 != 0) fail(network_, "fi_enable", rc2);
  if (shm) {
    // The endpoint's name is "fi_shm://<ours>:<uid>:<index>", its region "/dev/shm/<ours>:<uid>:<index>".
    const std::vector<uint8_t> address = this->address();
    const std::string full(reinterpret_cast<const char*>(address.data()),
                           strnlen(reinterpret_cast<const char*>(address.data()), address.size()));
    const std::string prefix = "fi_shm://";
    region_name_ = full.starts_with(prefix) ? full.substr(prefix.size()) : "";
  }
}

// The shm provider (1.17) names its region after the process id. A region a killed process left in
// /dev/shm outlives it; when a later process gets the same pid (pid_max is 32768 in containers),
// libfabric finds the region's recorded owner alive, itself, and fi_enable fails with EBUSY. A name
// of our own, with a random part, never meets a leftover.
void Fabric::name_shm_region() {
  const std::string name = unique_name("fi_shm://h2-").name;
  std::free(info_->src_addr);
  info_->src_addr = strdup(name.c_str());  // fi_freeinfo frees it
  if (info_->src_addr == nullptr) throw Error(H2_STATUS_OUT_OF_MEMORY, "DiComm: strdup failed");
  info_->src_addrlen = name.size() + 1;
  info_->addr_format = FI_ADDR_STR;
}

void Fabric::unlink_region_name(const std::string& name) {
  if (!name.empty()) shm_unlink(name.c_str());
}

Fabric::~Fabric() {
  // The endpoint goes first: it drops every posted operation before the memory they name is freed.
  if (ep_ != nullptr) fi_close(&ep_->fid);
  if (av_ != nullptr) fi_close(&av_->fid);
  if (cq_ != nullptr) fi_close(&cq_->fid);
  if (domain_ != nullptr) fi_close(&domain_->fid);
  if (fabric_ != nullptr) fi_close(&fabric_->fid);
  if (info_ != nullptr) fi_freeinfo(info_);
}

std::vector<uint8_t> Fabric::address() const {
  std::vector<uint8_t> name(256);
  size_t length = name.size();
  ssize_t rc = fi_getname(&ep_->fid, name.data(), &length);
  if (rc == -FI_ETOOSMALL) {
    name.resize(length);
    rc = fi_getname(&ep_->fid, name.data(), &length);
  }
  if (rc != 0) fail(network_, "fi_getname", rc);
  name.resize(length);
  return name;
}

fi_addr_t Fabric::insert(int rank, const std::vector<uint8_t>& address) {
  fi_addr_t result = FI_ADDR_NOTAVAIL;
  const int inserted = fi_av_insert(av_, address.data(), 1, &result, 0, nullptr);
  if (inserted != 1)
    throw Error(H2_STATUS_INTERNAL, "DiComm: fi_av_insert of rank " + std::to_string(rank) + "'s address on " +
                                        network_.describe() +
                                        " failed: " + error_text(inserted < 0 ? inserted : -FI_EINVAL));
  return result;
}

void* Fabric::register_memory(void* data, size_t bytes, void** handle) {
  fid_mr* mr = nullptr;
  const ssize_t rc = fi_mr_reg(domain_, data, bytes, FI_SEND | FI_RECV, 0, next_key_++, 0, &mr, nullptr);
  if (rc != 0) fail(network_, "fi_mr_reg", rc);
  *handle = mr;
  return fi_mr_desc(mr);
}

void Fabric::deregister(void* handle) {
  if (handle != nullptr) fi_close(&static_cast<fid_mr*>(handle)->fid);
}

ssize_t Fabric::post_send(const void* data, size_t bytes, void* desc, fi_addr_t peer, uint64_t tag,
                          std::optional<uint64_t> label, void* context) {
  return label ? fi_tsenddata(ep_, data, bytes, desc, *label, peer, tag, context)
               : fi_tsend(ep_, data, bytes, desc, peer, tag, context);
}

ssize_t Fabric::post_recv(void* data, size_t bytes, void* desc, uint64_t tag, void* context) {
  // The sender's rank is part of the tag, so any source may match: no FI_DIRECTED_RECV needed.
  return fi_trecv(ep_, data, bytes, desc, FI_ADDR_UNSPEC, tag, 0, context);
}

void Fabric::cancel(void* context) {
  fi_cancel(&ep_->fid, context);
}

size_t Fabric::poll(std::vector<Completion>& out, size_t max) {
  fi_cq_tagged_entry entries[64];
  const size_t want = std::min<size_t>(max, 64);
  const ssize_t n = fi_cq_read(cq_, entries, want);
  if (n > 0) {
    for (ssize_t i = 0; i < n; ++i) {
      const fi_cq_tagged_entry& entry = entries[i];
      const bool labelled = (entry.flags & FI_REMOTE_CQ_DATA) != 0;
      out.push_back({entry.op_context, 0, "", entry.len, labelled ? std::optional(entry.data) : std::nullopt});
    }
    return static_cast<size_t>(n);
  }
  if (n == -FI_EAGAIN) return 0;
  if (n == -FI_EAVAIL) {
    fi_cq_err_entry err{};
    if (fi_cq_readerr(cq_, &err, 0) == 1) {
      std::string text = fi_strerror(err.err);
      if (err.prov_errno != 0) {
        const char* detail = fi_cq_strerror(cq_, err.prov_errno, err.err_data, nullptr, 0);
        if (detail != nullptr && *detail != '\0' && text != detail) text += " (" + std::string(detail) + ")";
      }
      out.push_back({err.op_context, err.err, text, 0, std::nullopt});
      return 1;
    }
    return 0;
  }
  fail(network_, "fi_cq_read", n);
}

}  // namespace h2::dicomm::detail
