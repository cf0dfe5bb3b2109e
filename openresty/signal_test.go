package openresty

import "syscall"

// quitSignal asks nginx for a graceful shutdown.
const quitSignal = syscall.SIGQUIT
