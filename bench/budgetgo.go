// bench_budget.py's Go tracee: `budgetgo THREADS SECONDS SKIP` runs THREADS
// goroutines (GOMAXPROCS THREADS) calling hot, an FNV-1a hash of a 16-byte
// key, for SECONDS; prints `calls N seconds S cpu C` for the calls after
// SKIP seconds (C: the process's CPU seconds meanwhile) and a checksum.
// `budgetgo THREADS -CALLS`: CALLS calls per goroutine, the checksum only.
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

//go:noinline
func hot(k *[16]byte) uint32 {
	h := uint32(2166136261)
	for i := 0; i < 16; i++ {
		h ^= uint32(k[i])
		h *= 16777619
	}
	return h
}

type slot struct {
	calls int64
	sum   uint32
	_     [48]byte
}

func cpu() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
}

func main() {
	n, _ := strconv.Atoi(os.Args[1])
	runtime.GOMAXPROCS(n)
	fixed := int64(0)
	secs, skip := 3.0, 1.0
	if os.Args[2][0] == '-' {
		fixed, _ = strconv.ParseInt(os.Args[2][1:], 10, 64)
	} else {
		secs, _ = strconv.ParseFloat(os.Args[2], 64)
		skip, _ = strconv.ParseFloat(os.Args[3], 64)
	}
	slots := make([]slot, n)
	var stop int32
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(s *slot) {
			defer wg.Done()
			var key [16]byte
			for c := int64(0); (fixed != 0 && c < fixed) || (fixed == 0 && atomic.LoadInt32(&stop) == 0); c++ {
				for i := 0; i < 16; i++ {
					key[i] = byte(c>>(uint(i&3)*5)) + byte(i)
				}
				s.sum = s.sum*31 + hot(&key)
				atomic.StoreInt64(&s.calls, c+1)
			}
		}(&slots[i])
	}
	total := func() int64 {
		t := int64(0)
		for i := range slots {
			t += atomic.LoadInt64(&slots[i].calls)
		}
		return t
	}
	if fixed == 0 {
		time.Sleep(time.Duration(skip*1e9) - time.Since(t0))
		c0, u0, t1 := total(), cpu(), time.Now()
		time.Sleep(time.Duration(secs*1e9) - time.Since(t0))
		c1, u1, t2 := total(), cpu(), time.Now()
		atomic.StoreInt32(&stop, 1)
		wg.Wait()
		fmt.Printf("calls %d seconds %.6f cpu %.6f\n", c1-c0, t2.Sub(t1).Seconds(), u1-u0)
	} else {
		wg.Wait()
	}
	sum := uint32(0)
	for i := range slots {
		sum = sum*7 + slots[i].sum
	}
	fmt.Printf("checksum %08x\n", sum)
}
