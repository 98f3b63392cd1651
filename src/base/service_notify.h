// Telling a service manager how the process is doing: systemd's notify protocol
// (sd_notify(3)) without libsystemd. With `Type=notify` in the unit, `systemctl start`
// returns once "READY=1" is sent; "RELOADING=1" and "STOPPING=1" show in `systemctl status`.
//
//   (void)NotifyServiceManager("READY=1\nSTATUS=serving Kafka on 127.0.0.1:9092");
#pragma once

#include <string_view>

#include "base/status.h"

namespace sluice {

// Sends `state` (newline-separated VAR=value assignments) as one datagram to the socket
// named by $NOTIFY_SOCKET (a path, or '@' for Linux's abstract namespace). OK and nothing
// sent when the variable is unset or empty (not run by a service manager); an error when
// it names a socket that cannot be reached.
Status NotifyServiceManager(std::string_view state);

}  // namespace sluice
