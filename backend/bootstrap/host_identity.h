// Which host a rank runs on, as published to its peers through the Store.
//
// Two ranks are on the same host when their identities are equal. The identity
// is the hostname plus the kernel's boot id, so containers sharing a hostname on
// different machines are told apart. RINGX_HOST_ID overrides it (tests use this
// to make one machine look like several hosts).
#pragma once

#include <string>
#include <vector>

namespace ringx::bootstrap {

std::string hostIdentity();

// IPv4 addresses of this host's interfaces that are up, non-loopback first and
// 127.0.0.1 last; RINGX_SOCKET_ADDR (comma-separated) overrides the list.
std::vector<std::string> advertisedAddresses();

}  // namespace ringx::bootstrap
