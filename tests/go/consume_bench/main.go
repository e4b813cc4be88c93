// The Go side of scripts/bench-clients.sh: rocketmq-client-go v2's push consumer with its
// defaults (concurrent, ConsumeMessageBatchMaxSize 1, PullBatchSize 32) consumes COUNT messages of
// TOPIC as a new GROUP from the first offset, with a listener that only counts (and with
// "latency" records each message's born-to-listener latency). Prints one JSON line: the count,
// the milliseconds from start to the last message, and with "latency" the latency p50/p99 in ms.
//
//	consume_bench NAMESRV TOPIC GROUP COUNT [latency]
package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/rlog"
)

func main() {
	if len(os.Args) != 5 && !(len(os.Args) == 6 && os.Args[5] == "latency") {
		fmt.Fprintln(os.Stderr, "usage: consume_bench NAMESRV TOPIC GROUP COUNT [latency]")
		os.Exit(2)
	}
	latency := len(os.Args) == 6
	ns, topic, group := os.Args[1], os.Args[2], os.Args[3]
	count, err := strconv.ParseInt(os.Args[4], 10, 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	rlog.SetLogLevel("error")
	var seen int64
	// One slot per message, no lock shared by the listener goroutines (as the Rust bench); none
	// without "latency", where the listener only counts.
	slots := int64(0)
	if latency {
		slots = count
	}
	latencies := make([]int64, slots)
	done := make(chan struct{})
	var once sync.Once
	started := time.Now()
	c, err := rocketmq.NewPushConsumer(
		consumer.WithGroupName(group),
		consumer.WithNsResolver(primitive.NewPassthroughResolver([]string{ns})),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	err = c.Subscribe(topic, consumer.MessageSelector{}, func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		n := int64(len(msgs))
		first := atomic.AddInt64(&seen, n) - n
		if first < slots {
			now := time.Now().UnixMilli()
			for i, m := range msgs {
				if first+int64(i) < slots {
					latencies[first+int64(i)] = now - m.BornTimestamp + 1
				}
			}
		}
		if first+n >= count {
			once.Do(func() { close(done) })
		}
		return consumer.ConsumeSuccess, nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := c.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	select {
	case <-done:
	case <-time.After(300 * time.Second):
		fmt.Fprintf(os.Stderr, "consume_bench: only %d of %d in 300 s\n", atomic.LoadInt64(&seen), count)
		os.Exit(1)
	}
	ms := time.Since(started).Milliseconds()
	_ = c.Shutdown()
	filled := latencies[:0]
	for _, l := range latencies {
		if l > 0 {
			filled = append(filled, l-1)
		}
	}
	latencies = filled
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	p := func(q float64) int64 {
		if len(latencies) == 0 {
			return -1
		}
		return latencies[int(q*float64(len(latencies)-1))]
	}
	lat := ""
	if latency {
		lat = fmt.Sprintf(",\"p50_ms\":%d,\"p99_ms\":%d", p(0.5), p(0.99))
	}
	fmt.Printf("{\"client\":\"go\",\"count\":%d,\"ms\":%d%s}\n", atomic.LoadInt64(&seen), ms, lat)
	os.Exit(0)
}
