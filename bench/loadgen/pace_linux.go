package main

import (
	"os"
	"strconv"
	"syscall"
	"time"
	"unsafe"
)

// sleepUntil waits for due with the kernel's high-resolution timer. The runtime's own timers wake
// through its network poller, whose epoll wait counts in whole milliseconds: at 1,000 requests a
// second that made the generator send 0.6 ms late at the median, and the lateness counted as the
// server's latency. The pacing goroutine holds its own OS thread (see main), so blocking it in
// nanosleep stalls nothing else, and it does not spin a core away from the server it measures.
func sleepUntil(due time.Time) {
	for {
		wait := time.Until(due)
		if wait <= 0 {
			return
		}
		spec := syscall.NsecToTimespec(wait.Nanoseconds())
		syscall.Nanosleep(&spec, nil)
	}
}

// joinRealtimeClass puts every thread of the generator in the kernel's real-time FIFO class at its
// lowest priority (threads the runtime starts later inherit it), and reports whether that was
// allowed. Traced at 1,000 requests a second on the 2-core machine the server shares, the slowest
// 1 % of requests had been sent 1-2 ms late on average and read back late too: the pacing thread
// woke from nanosleep late, and the goroutines that send and read waited for a core, while the
// server, PostgreSQL and Redis ran. That is lateness of the instrument, not of the server (a real
// client does not wait for the server's cores), yet it counted in every latency. The generator
// uses a fifth of a core at that rate, all in short bursts, so it still leaves the server the rest.
func joinRealtimeClass() bool {
	const schedFIFO = 1
	param := struct{ priority int32 }{priority: 1}
	threads, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return false
	}
	for _, thread := range threads {
		tid, _ := strconv.Atoi(thread.Name())
		if _, _, errno := syscall.RawSyscall(syscall.SYS_SCHED_SETSCHEDULER, uintptr(tid), schedFIFO, uintptr(unsafe.Pointer(&param))); errno != 0 {
			return false
		}
	}
	return true
}
