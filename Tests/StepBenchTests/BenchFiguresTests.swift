import ArgumentParser
import AsyncHTTPClient
import Foundation
import StepCore
import StepStore
import Testing

@testable import stepbench

/// The arithmetic behind every figure `stepbench` prints: nearest-rank percentiles, medians over rounds, the CPU
/// readings from /proc, the per-request figures of a phase and the CPU bound `compare` derives from them.
@Suite("stepbench's figures")
struct BenchFiguresTests {
    /// A phase that answered one request per latency (whole milliseconds) in `seconds`.
    static func report(
        latenciesMs: [Int], seconds: Double = 10, serverCPU: Double? = nil, loadCPU: Double? = nil,
        busy: Double? = nil
    ) -> BenchReport {
        var tally = BenchTally()
        for latency in latenciesMs { tally.record(status: 200, latency: .milliseconds(latency)) }
        return BenchReport(
            title: "phase", walkers: 1, warmup: .zero, measuredSeconds: seconds, tally: tally,
            serverCPUMicroseconds: serverCPU, cpuNote: nil, loadCPUMicroseconds: loadCPU, machineBusy: busy)
    }

    static func close(_ value: Double?, _ expected: Double) -> Bool {
        guard let value else { return false }
        return abs(value - expected) < 1e-9 * max(1, abs(expected))
    }

    @Test("percentiles are nearest-rank over the sorted latencies, whatever order they came in")
    func nearestRank() throws {
        let shuffled = (1...100).map(Double.init).shuffled()
        let latencies = LatencyDistribution(shuffled)
        #expect(latencies.percentile(0.5) == 50)
        #expect(latencies.percentile(0.9) == 90)
        #expect(latencies.percentile(0.99) == 99)
        #expect(latencies.percentile(1) == 100)
        #expect(latencies.percentile(0) == 1)
        #expect(latencies.median == 50)
        // Three values: the rank is rounded up (0.99 × 3 = 2.97 → the third, 0.5 × 3 = 1.5 → the second).
        let three = LatencyDistribution([30, 10, 20])
        #expect(three.percentile(0.99) == 30)
        #expect(three.percentile(0.5) == 20)
        #expect(three.percentile(0.34) == 20)
        #expect(three.percentile(0.33) == 10)
        #expect(LatencyDistribution([]).percentile(0.99) == nil)
    }

    @Test("the median of the rounds: the middle value, or the mean of the two middle ones")
    func medianOfRounds() {
        #expect([3.0, 1, 2].median == 2)
        #expect([4.0, 1, 3, 2].median == 2.5)
        #expect([7.0].median == 7)
        #expect([Double]().median == nil)
    }

    @Test("a phase's per-request figures divide what was measured by the requests answered")
    func perRequestFigures() {
        let phase = Self.report(
            latenciesMs: [1, 2, 3, 4], seconds: 2, serverCPU: 800, loadCPU: 400, busy: 0.5)
        #expect(phase.requests == 4)
        #expect(phase.requestsPerSecond == 2)
        #expect(phase.cpuMicrosecondsPerRequest == 200)
        #expect(phase.loadCPUMicrosecondsPerRequest == 100)
        #expect(phase.machineBusyPercent == 50)
        #expect(Self.close(phase.latencies.percentile(0.99), 4))

        let empty = Self.report(latenciesMs: [], seconds: 2, serverCPU: 800, loadCPU: 400, busy: 0.5)
        #expect(empty.requestsPerSecond == 0)
        #expect(empty.cpuMicrosecondsPerRequest == nil)
        #expect(empty.loadCPUMicrosecondsPerRequest == nil)
        let unmeasured = Self.report(latenciesMs: [1, 2])
        #expect(unmeasured.cpuMicrosecondsPerRequest == nil)
        #expect(unmeasured.machineBusyPercent == nil)
    }

    @Test("only 2xx answers are served: another status is counted, not timed; a timeout is timed at its wait")
    func servedAnswers() throws {
        var tally = BenchTally()
        for latency in [4, 5, 6] { tally.record(status: 200, latency: .milliseconds(latency)) }
        tally.record(status: 201, latency: .milliseconds(7))
        for _ in 0..<50 { tally.record(status: 503, latency: .microseconds(100)) }
        tally.recordError(HTTPClientError.deadlineExceeded, latency: .seconds(10))
        tally.recordError(HTTPClientError.remoteConnectionClosed, latency: .milliseconds(1))
        #expect(tally.served == 4)
        #expect(tally.transportErrors == 2)
        #expect(tally.timeouts == 1)
        #expect(tally.statusMix == "200=3 201=1 503=50")
        #expect(tally.hints.contains { $0.contains("1 requests timed out") })
        let report = BenchReport(
            title: "phase", walkers: 1, warmup: .zero, measuredSeconds: 2, tally: tally, serverCPUMicroseconds: 800,
            cpuNote: nil, loadCPUMicroseconds: nil, machineBusy: nil)
        #expect(report.requests == 4)
        #expect(report.requestsPerSecond == 2)
        #expect(report.cpuMicrosecondsPerRequest == 200)
        // The fast 503s pull nothing down; the timeout is the slowest of the five timed requests.
        #expect(report.latencies.count == 5)
        #expect(report.latencies.percentile(0.2) == 4)
        #expect(report.latencies.percentile(0.99) == 10_000)
        // Walkers' tallies are merged into the phase's: the timeouts with them.
        var merged = BenchTally()
        merged.merge(tally)
        merged.merge(tally)
        #expect(merged.timeouts == 2 && merged.transportErrors == 4 && merged.served == 8)
        #expect(merged.hints.contains { $0.contains("2 requests timed out") })
    }

    @Test("compare: every phase of every round has walkers of its own")
    func freshWalkersPerPhase() {
        var seen = Set<String>()
        for round in 1...3 {
            for side in ["a", "b"] {
                let ids = Compare.walkerIds(run: "run1", round: round, side: side, count: 64)
                #expect(ids.count == 64 && Set(ids).count == 64)
                #expect(seen.isDisjoint(with: ids), "round \(round) side \(side)")
                seen.formUnion(ids)
            }
        }
        #expect(!Set(Compare.walkerIds(run: "r", round: 1, side: "a", count: 20)).contains("cmp-r-r1-1"))
    }

    @Test("medians over rounds: the p99 of each round first; a figure a round lacks leaves that round out")
    func medianP99() {
        let rounds = [
            Self.report(latenciesMs: Array(repeating: 10, count: 100)),
            Self.report(latenciesMs: Array(repeating: 30, count: 100)),
            Self.report(latenciesMs: Array(repeating: 1, count: 98) + [20, 20]),
        ]
        #expect(Self.close(rounds.medianP99, 20))
        #expect([BenchReport]().medianP99 == nil)
        // A figure some rounds lack is the median of the rounds that have it.
        let measured = [
            Self.report(latenciesMs: [1], serverCPU: 30), Self.report(latenciesMs: [1]),
            Self.report(latenciesMs: [1], serverCPU: 10),
        ]
        #expect(measured.median(\.cpuMicrosecondsPerRequest) == 20)
        #expect(rounds.median(\.cpuMicrosecondsPerRequest) == nil)
    }

    @Test("the cpu bound: the subject's rate over its busy share, and both p99s scaled by their busy shares")
    func cpuBound() throws {
        // 1 000 requests in 10 s at 80 % busy; the baseline's p99 5 ms at 90 % busy.
        let subject = [Self.report(latenciesMs: Array(repeating: 20, count: 1_000), busy: 0.8)]
        let baseline = [Self.report(latenciesMs: Array(repeating: 5, count: 4_000), busy: 0.9)]
        let bound = try #require(CPUBound(subject: subject, baseline: baseline))
        #expect(Self.close(bound.requestsPerSecond, 125))
        #expect(Self.close(bound.reachedShare, 0.8))
        #expect(Self.close(bound.p99Ratio, 20 * 0.8 / (5 * 0.9)))

        // Both sides equally busy: the estimate is the measured p99 ratio.
        let equallyBusy = [Self.report(latenciesMs: Array(repeating: 5, count: 4_000), busy: 0.8)]
        #expect(Self.close(CPUBound(subject: subject, baseline: equallyBusy)?.p99Ratio, 4))

        let unknownBusy = [Self.report(latenciesMs: Array(repeating: 5, count: 4_000))]
        #expect(CPUBound(subject: subject, baseline: unknownBusy) == nil)
        #expect(CPUBound(subject: unknownBusy, baseline: baseline) == nil)
        let idle = [Self.report(latenciesMs: Array(repeating: 20, count: 1_000), busy: 0)]
        #expect(CPUBound(subject: idle, baseline: baseline) == nil)
        let unanswered = [Self.report(latenciesMs: [], busy: 0.8)]
        #expect(CPUBound(subject: unanswered, baseline: baseline) == nil)
    }

    @Test("/proc/stat: busy is every counted tick but idle and iowait, and guest time is not counted twice")
    func machineReading() throws {
        let text = "cpu  100 20 30 400 50 6 7 8 90 10\ncpu0 50 10 15 200 25 3 3 4 45 5\nintr 12345\n"
        let reading = try #require(MachineCPUProbe.parse(text))
        #expect(reading.total == 621)
        #expect(reading.busy == 171)
        #expect(MachineCPUProbe.parse("intr 1 2 3\ncpu  1 2 3 4 5") == nil)
        #expect(MachineCPUProbe.parse("cpu  1 2 3") == nil)
        #expect(MachineCPUProbe.parse("") == nil)

        let start = MachineCPUProbe.Reading(total: 1_000, busy: 100)
        let end = MachineCPUProbe.Reading(total: 1_200, busy: 250)
        #expect(MachineCPUProbe.busyFraction(from: start, to: end) == 0.75)
        #expect(MachineCPUProbe.busyFraction(from: start, to: start) == nil)
        #expect(MachineCPUProbe.busyFraction(from: end, to: MachineCPUProbe.Reading(total: 1_300, busy: 200)) == nil)

        let live = try #require(MachineCPUProbe.reading())
        #expect(live.busy <= live.total)
        #expect(live.total > 0)
    }

    @Test("a process's CPU: utime and stime counted after the command name, even one with spaces and parentheses")
    func processReading() throws {
        let fields = (3...20).map { $0 == 14 ? "150" : $0 == 15 ? "50" : "0" }.joined(separator: " ")
        #expect(ProcessCPUProbe.ticks(inStat: "4242 (a (b) c) \(fields)") == 200)
        #expect(ProcessCPUProbe.ticks(inStat: "4242 (stepd) R 1 2") == nil)
        #expect(ProcessCPUProbe.ticks(inStat: "no command name") == nil)

        let probe = try ProcessCPUProbe(pid: getpid())
        let before = try probe.microseconds()
        // Burn CPU until the clock-tick counter moves (one tick is usually 10 ms), for at most 5 s of wall time.
        let deadline = Date().addingTimeInterval(5)
        var spin: UInt64 = 1
        var after = before
        while after == before, Date() < deadline {
            for step in 0..<200_000 { spin = spin &* 6_364_136_223_846_793_005 &+ UInt64(step) }
            after = try probe.microseconds()
        }
        #expect(spin != 0)
        #expect(after > before)
        #expect(throws: BenchError.self) { try ProcessCPUProbe(pid: Int32.max) }
    }

    @Test("several processes' CPU is their sum; an empty list or one missing process is refused")
    func processesReading() throws {
        let one = try ProcessCPUProbe(pid: getpid())
        let twice = try ProcessCPUProbe(pids: [getpid(), getpid()])
        // CPU time only grows, so the sum read between two single readings lies between their doubles.
        let before = try one.microseconds()
        let sum = try twice.microseconds()
        let after = try one.microseconds()
        #expect(sum >= 2 * before)
        #expect(sum <= 2 * after)
        #expect(twice.processes == "processes \(getpid()), \(getpid())")
        #expect(one.processes == "process \(getpid())")
        #expect(throws: BenchError.self) { try ProcessCPUProbe(pids: []) }
        #expect(throws: BenchError.self) { try ProcessCPUProbe(pids: [getpid(), Int32.max]) }
    }
}

/// How a phase with several servers shares its walkers' requests among them.
@Suite("stepbench's routing")
struct BenchRoutingTests {
    let servers = [1, 2, 3].compactMap { try? BenchTarget(parsing: "http://127.0.0.1:\($0)") }

    func makePhase(_ routing: BenchRouting, servers: [BenchTarget]? = nil) -> BenchPhase {
        let servers = servers ?? self.servers
        return BenchPhase(
            title: "t", target: servers[0], others: Array(servers.dropFirst()), routing: routing, tokens: [],
            keyPrefix: "k")
    }

    @Test("targets and databases are on this machine only: loopback hosts, http, no credentials; socket folders")
    func loopbackOnly() throws {
        for url in ["http://127.0.0.1:8080", "http://localhost", "http://[::1]:9/base/"] {
            #expect(throws: Never.self) { try BenchTarget(parsing: url) }
        }
        for url in [
            "http://10.0.0.1:8080", "http://example.com", "https://127.0.0.1", "http://u:p@127.0.0.1",
            "http://127.0.0.1.example.com", "127.0.0.1:8080", "http://127.0.0.1/?q=1",
        ] {
            #expect(throws: ValidationError.self, "\(url)") { try BenchTarget(parsing: url) }
        }
        for database in [
            "/tmp/bench.sqlite", "sqlite:///tmp/b.sqlite", "postgres://postgres@127.0.0.1:5432/postgres",
            "postgresql://u@localhost/db", "postgres://u@[::1]:5433/db", "postgres://postgres@/db?host=/tmp/pg&port=5",
        ] {
            #expect(throws: Never.self, "\(database)") { try BenchDatabase.check(database) }
        }
        for database in [
            "postgres://u@db.example.com:5432/db", "postgres://u@192.168.1.4/db", "Postgres://u@127.0.0.1/db",
            "postgres://u@127.0.0.1/db?host=relative",
        ] {
            #expect(throws: ValidationError.self, "\(database)") { try BenchDatabase.check(database) }
        }
    }

    @Test("pinned: walker i always goes to server i mod n")
    func pinned() {
        #expect(servers.count == 3)
        var generator = SystemRandomNumberGenerator()
        let phase = makePhase(.pinned)
        for walker in 0..<9 {
            let first = phase.target(walker: walker, using: &generator)
            #expect(first.base == servers[walker % 3].base)
            for _ in 0..<20 { #expect(phase.target(walker: walker, using: &generator).base == first.base) }
        }
    }

    @Test("spread: one walker's requests reach every server, and only those")
    func spread() {
        var generator = SystemRandomNumberGenerator()
        let phase = makePhase(.spread)
        let reached = Set((0..<300).map { _ in phase.target(walker: 4, using: &generator).base })
        #expect(reached == Set(servers.map(\.base)))
    }

    @Test("one server takes every request whatever the routing")
    func single() {
        var generator = SystemRandomNumberGenerator()
        for routing in BenchRouting.allCases {
            let phase = makePhase(routing, servers: [servers[1]])
            for walker in 0..<5 {
                #expect(phase.target(walker: walker, using: &generator).base == servers[1].base)
            }
        }
    }
}

/// The entries `stepbench cache-memory` measures.
@Suite("stepbench cache-memory's entries")
struct CacheMemoryEntryTests {
    @Test("each entry is a walker of its own, shaped as an accepted ingest of an attested day leaves it")
    func entries() {
        let day = LocalDate(iso: "2026-05-18")!
        let now = Date()
        let entries = (0..<64).map { CacheMemory.entry($0, day: day, now: now) }
        #expect(Set(entries.map(\.walker.walkerId)).count == 64)
        for entry in entries {
            #expect(entry.walker.walkerId.utf8.count == 36)
            #expect(entry.state.log?.walkerId == entry.walker.walkerId)
            #expect(entry.day == day && entry.state.log?.day == day)
            #expect(entry.state.pendingReconcileAt != nil)
        }
        #expect(entries.filter(\.admitting).count == 32, "half of them admitting")
    }
}
