// svc_go: a Go service for tests/e2e/test_services.py (docs/testing.md
// "Services"): 4 goroutines on GOMAXPROCS 4 hash ROUNDS rounds each through
// main.hashLoop (the range), sleeping 2 ms between rounds; the main
// goroutine prints a heartbeat once a second; at the end a checksum that
// depends only on ROUNDS.
//
//	svc_go [ROUNDS]    ready PID / beat N DONE/TOTAL / checksum HEX
package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

const (
	workers = 4
	bufSize = 2048
	calls   = 8 // hashLoop calls a round
)

// hashLoop is the hot function: FNV-1a over buf, from h.
//
//go:noinline
func hashLoop(buf []byte, h uint64) uint64 {
	for _, b := range buf {
		h ^= uint64(b)
		h *= 0x100000001b3
	}
	return h
}

func splitmix(x *uint64) uint64 {
	*x += 0x9e3779b97f4a7c15
	z := *x
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// hurry: stdin has ended, the workers no longer sleep.
var hurry int32

func work(w int, rounds int, done *int64) uint64 {
	buf := make([]byte, bufSize)
	h := uint64(0xcbf29ce484222325)
	for r := 0; r < rounds; r++ {
		x := uint64(w)<<32 | uint64(r)
		for i := 0; i < bufSize; i += 8 {
			v := splitmix(&x)
			for j := 0; j < 8; j++ {
				buf[i+j] = byte(v >> (8 * j))
			}
		}
		for c := 0; c < calls; c++ {
			h = hashLoop(buf[c:], h)
		}
		atomic.AddInt64(done, 1)
		if atomic.LoadInt32(&hurry) == 0 {
			time.Sleep(2 * time.Millisecond)
		}
	}
	return h
}

func main() {
	rounds := 3000
	if len(os.Args) > 1 {
		n, err := strconv.Atoi(os.Args[1])
		if err != nil || n < 1 {
			fmt.Fprintln(os.Stderr, "usage: svc_go [ROUNDS]")
			os.Exit(2)
		}
		rounds = n
	}
	runtime.GOMAXPROCS(workers)
	go func() {
		io.Copy(io.Discard, os.Stdin)
		atomic.StoreInt32(&hurry, 1)
	}()
	var done int64
	res := make([]uint64, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			res[w] = work(w, rounds, &done)
		}(w)
	}
	fmt.Printf("ready %d\n", os.Getpid())
	fin := make(chan struct{})
	go func() { wg.Wait(); close(fin) }()
	tick := time.NewTicker(time.Second)
	for n := 1; ; n++ {
		select {
		case <-fin:
			c := uint64(0xcbf29ce484222325)
			for _, h := range res {
				c = (c ^ h) * 0x100000001b3
			}
			fmt.Printf("checksum %016x\n", c)
			return
		case <-tick.C:
			fmt.Printf("beat %d %d/%d\n", n, atomic.LoadInt64(&done), rounds*workers)
		}
	}
}
