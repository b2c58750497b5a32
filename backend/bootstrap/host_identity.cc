#include "backend/bootstrap/host_identity.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace ringx::bootstrap {

std::string hostIdentity() {
  if (const char* forced = std::getenv("RINGX_HOST_ID"); forced && *forced) {
    return forced;
  }
  char name[256] = {0};
  ::gethostname(name, sizeof(name) - 1);
  std::string bootId;
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::getline(in, bootId);
  return std::string(name) + "/" + bootId;
}

std::vector<std::string> advertisedAddresses() {
  std::vector<std::string> out;
  if (const char* forced = std::getenv("RINGX_SOCKET_ADDR"); forced && *forced) {
    std::stringstream list(forced);
    std::string item;
    while (std::getline(list, item, ',')) {
      if (!item.empty()) out.push_back(item);
    }
    return out;
  }
  ifaddrs* addrs = nullptr;
  if (::getifaddrs(&addrs) == 0) {
    for (ifaddrs* it = addrs; it != nullptr; it = it->ifa_next) {
      if (!it->ifa_addr || it->ifa_addr->sa_family != AF_INET) continue;
      if (!(it->ifa_flags & IFF_UP) || (it->ifa_flags & IFF_LOOPBACK)) continue;
      char text[INET_ADDRSTRLEN];
      auto* sin = reinterpret_cast<sockaddr_in*>(it->ifa_addr);
      if (::inet_ntop(AF_INET, &sin->sin_addr, text, sizeof(text))) out.push_back(text);
    }
    ::freeifaddrs(addrs);
  }
  out.push_back("127.0.0.1");
  return out;
}

}  // namespace ringx::bootstrap
