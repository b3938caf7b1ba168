import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1

/// How every load phase of a run is driven: how many walkers, for how long.
struct BenchPlan: Sendable {
    let walkers: Int
    let warmup: Duration
    let duration: Duration
    /// Requests per second over all walkers on a fixed schedule (an open loop); nil: each walker sends again as
    /// soon as it is answered (a closed loop).
    var rate: Double? = nil
    let requestTimeout: TimeAmount
    let maxResponseBytes: Int

    /// What a phase's child tasks hand back.
    private enum PhaseResult: Sendable {
        case walker(BenchTally)
        case cpuAtMeasureStart(CPUSnapshot)
    }

    /// CPU times read together: the server's (when a probe was given), the load generator's own, the machine's.
    private struct CPUSnapshot: Sendable {
        var server: Double?
        var own: Double?
        var machine: MachineCPUProbe.Reading?

        init(server: ProcessCPUProbe?, own: ProcessCPUProbe?) {
            self.server = try? server?.microseconds()
            self.own = try? own?.microseconds()
            machine = MachineCPUProbe.reading()
        }
    }

    /// Runs `phase` with `walkers` concurrent walkers for the warm-up plus the measured duration. The CPU time of the
    /// server (with a `cpu` probe), of this process and of the whole machine is read when the measurement starts and
    /// again when the last request has ended.
    func run(_ phase: BenchPhase, client: HTTPClient, cpu: ProcessCPUProbe?) async -> BenchReport {
        let clock = ContinuousClock()
        let start = clock.now
        let window = BenchWindow(start: start, measureFrom: start + warmup, stopAt: start + warmup + duration)
        let own = try? ProcessCPUProbe(pid: getpid())
        let (tally, cpuStart) = await withTaskGroup(of: PhaseResult.self) { group in
            for walker in 0..<walkers {
                group.addTask {
                    .walker(await walk(walker, phase: phase, client: client, clock: clock, window: window))
                }
            }
            group.addTask {
                try? await Task.sleep(until: window.measureFrom, clock: clock)
                return .cpuAtMeasureStart(CPUSnapshot(server: cpu, own: own))
            }
            var total = BenchTally()
            var cpuStart: CPUSnapshot?
            for await result in group {
                switch result {
                case .walker(let one): total.merge(one)
                case .cpuAtMeasureStart(let value): cpuStart = value
                }
            }
            return (total, cpuStart)
        }
        let cpuEnd = CPUSnapshot(server: cpu, own: own)
        // Requests started before `stopAt` are waited for, so the measured time runs until the last one ended.
        let measured = clock.now - window.measureFrom
        var serverCPU: Double?
        var cpuNote: String?
        if let cpu {
            if let begun = cpuStart?.server, let ended = cpuEnd.server {
                serverCPU = ended - begun
            } else {
                cpuNote = "could not read the CPU time of \(cpu.processes) around the measured phase"
            }
        }
        var loadCPU: Double?
        if let begun = cpuStart?.own, let ended = cpuEnd.own { loadCPU = ended - begun }
        var busy: Double?
        if let begun = cpuStart?.machine, let ended = cpuEnd.machine {
            busy = MachineCPUProbe.busyFraction(from: begun, to: ended)
        }
        return BenchReport(
            title: phase.title, walkers: walkers, warmup: warmup, measuredSeconds: measured.seconds, tally: tally,
            serverCPUMicroseconds: serverCPU, cpuNote: cpuNote, loadCPUMicroseconds: loadCPU, machineBusy: busy)
    }

    /// The instant a paced walker's request number `sequence` is due: every walker sends every `walkers / rate`
    /// seconds, the walkers' schedules spread evenly over one such interval.
    static func scheduled(
        walker: Int, sequence: Int, walkers: Int, rate: Double, from start: ContinuousClock.Instant
    ) -> ContinuousClock.Instant {
        let interval = Double(walkers) / rate
        return start + .seconds(interval * (Double(walker) / Double(walkers) + Double(sequence)))
    }

    /// One walker: one request at a time until the phase ends, each as soon as the last is answered or, with a
    /// `rate`, at its scheduled time (at once when the walker is behind). Latency counts for requests started
    /// (or scheduled) after warm-up, from when each started (or was scheduled).
    private func walk(
        _ walker: Int, phase: BenchPhase, client: HTTPClient, clock: ContinuousClock, window: BenchWindow
    ) async -> BenchTally {
        var tally = BenchTally()
        var maker = BenchRequestMaker(phase: phase, walker: walker)
        let span = window.stopAt - window.start
        var sequence = 0
        while !Task.isCancelled {
            var began = clock.now
            if let rate {
                let due = Self.scheduled(
                    walker: walker, sequence: sequence, walkers: walkers, rate: rate, from: window.start)
                guard due < window.stopAt else { break }
                if due > began { try? await Task.sleep(until: due, clock: clock) }
                began = due
            }
            guard began < window.stopAt else { break }
            let measured = began >= window.measureFrom
            do {
                let request = try maker.request(sequence: sequence, progress: (began - window.start) / span)
                sequence += 1
                let response = try await client.execute(request, timeout: requestTimeout)
                _ = try await response.body.collect(upTo: maxResponseBytes)
                if measured { tally.record(status: Int(response.status.code), latency: clock.now - began) }
            } catch {
                if measured { tally.recordError(error, latency: clock.now - began) }
                // Do not spin against a server that has gone away.
                try? await Task.sleep(for: .milliseconds(50))
            }
        }
        return tally
    }
}

/// The instants that bound a phase.
struct BenchWindow: Sendable {
    let start: ContinuousClock.Instant
    let measureFrom: ContinuousClock.Instant
    let stopAt: ContinuousClock.Instant
}
