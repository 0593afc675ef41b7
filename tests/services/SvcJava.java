// SvcJava: a Java service for tests/e2e/test_services.py (docs/testing.md
// "Services"): 4 threads deflate ROUNDS rounds each with
// java.util.zip.Deflater at level 0 (the JDK's libzip over Debian's zlib,
// libz.so.1: stored blocks, and its zlib wrapper runs libz's adler32_z over
// every input, the range: a fifth of the samples),
// sleeping 2 ms between rounds until stdin ends (then flat out: the same
// work); the main thread prints a heartbeat once a second; at the end a
// checksum that depends only on ROUNDS (and on zlib's output, the same in
// every run on one machine).
//
//     java -cp DIR SvcJava [ROUNDS]    ready PID / beat N DONE/TOTAL / checksum HEX
import java.util.concurrent.atomic.AtomicLong;
import java.util.zip.CRC32;
import java.util.zip.Deflater;

public class SvcJava {
    static final int WORKERS = 4, BUF_SIZE = 32768, CALLS = 1;
    /** stdin has ended: the workers no longer sleep. */
    static volatile boolean hurry;

    static long splitmix(long[] x) {
        long z = (x[0] += 0x9e3779b97f4a7c15L);
        z = (z ^ (z >>> 30)) * 0xbf58476d1ce4e5b9L;
        z = (z ^ (z >>> 27)) * 0x94d049bb133111ebL;
        return z ^ (z >>> 31);
    }

    static long work(int w, int rounds, AtomicLong done) throws InterruptedException {
        byte[] buf = new byte[BUF_SIZE], out = new byte[2 * BUF_SIZE];
        long h = 0xcbf29ce484222325L;
        Deflater d = new Deflater(Deflater.NO_COMPRESSION);
        CRC32 crc = new CRC32();
        for (int r = 0; r < rounds; r++) {
            // bytes that depend on (w, r) only
            long[] x = {((long) w << 32) | r};
            for (int i = 0; i < BUF_SIZE; i += 8) {
                long v = splitmix(x) & 0x0f0f0f0f0f0f0f0fL;
                for (int j = 0; j < 8; j++)
                    buf[i + j] = (byte) (v >>> (8 * j));
            }
            for (int c = 0; c < CALLS; c++) {
                d.reset();
                d.setInput(buf, c, BUF_SIZE - c);
                d.finish();
                int n = 0;
                while (!d.finished())
                    n += d.deflate(out, n, out.length - n);
                crc.reset();
                crc.update(out, 0, n);
                h = (h ^ crc.getValue() ^ ((long) n << 32)) * 0x100000001b3L;
            }
            done.incrementAndGet();
            if (!hurry)
                Thread.sleep(2);
        }
        d.end();
        return h;
    }

    public static void main(String[] args) throws Exception {
        int rounds = 3000;
        if (args.length > 0) {
            try {
                rounds = Integer.parseInt(args[0]);
            } catch (NumberFormatException e) {
                rounds = 0;
            }
            if (rounds < 1) {
                System.err.println("usage: java SvcJava [ROUNDS]");
                System.exit(2);
            }
        }
        Thread stdin = new Thread(() -> {
            try {
                while (System.in.read(new byte[512]) >= 0)
                    ;
            } catch (java.io.IOException e) {
                // (ended all the same)
            }
            hurry = true;
        }, "svc-stdin");
        stdin.setDaemon(true);
        stdin.start();
        final int n = rounds;
        AtomicLong done = new AtomicLong();
        long[] res = new long[WORKERS];
        Thread[] ts = new Thread[WORKERS];
        for (int w = 0; w < WORKERS; w++) {
            final int k = w;
            ts[w] = new Thread(() -> {
                try {
                    res[k] = work(k, n, done);
                } catch (InterruptedException e) {
                    throw new RuntimeException(e);
                }
            }, "svc-worker-" + w);
            ts[w].start();
        }
        System.out.println("ready " + ProcessHandle.current().pid());
        long start = System.nanoTime();
        for (int beat = 1;; beat++) {
            boolean alive = false;
            long until = start + beat * 1_000_000_000L;
            for (Thread t : ts) {
                long left = until - System.nanoTime();
                if (left > 0)
                    t.join(Math.max(1, left / 1_000_000));
                alive |= t.isAlive();
            }
            if (!alive)
                break;
            System.out.println("beat " + beat + " " + done.get() + "/" + (long) n * WORKERS);
        }
        long c = 0xcbf29ce484222325L;
        for (long h : res)
            c = (c ^ h) * 0x100000001b3L;
        System.out.println(String.format("checksum %016x", c));
    }
}
