import ArgumentParser
import Foundation
import StepCore
import StepStore

/// `stepbench cache-memory`: the memory the PostgreSQL ingest cache (`IngestStateCache`) holds per walker: this
/// process's resident memory (`/proc/self/statm`) before and after two full generations of entries shaped like the
/// ones an ingest leaves are stored.
struct CacheMemory: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cache-memory",
        abstract: "Measure the memory the ingest cache holds per walker (this process's resident memory).",
        discussion: """
            Stores 2 × CAPACITY entries into an IngestStateCache of CAPACITY walkers per generation (both \
            generations end full), each built inside the measured window as an accepted ingest leaves it: a \
            36-character walker id, the day's step log (its own copy of the id), two streak runs, a pending \
            reconcile time and the walker's standing. Prints the resident memory added, in all and per entry \
            (Linux only).
            """)

    @Option(help: "Walkers per generation (the server's is 8192).")
    var capacity: Int = 8_192

    func validate() throws {
        try ValidationError.check("--capacity", capacity, in: 1...1_000_000)
    }

    func run() throws {
        let day = LocalDate(instant: Date(), in: .gmt)
        let now = Date()
        // Warm up the runtime (metadata, the first dictionaries) outside the measured window.
        let warmUp = IngestStateCache(capacity: 4)
        for index in 0..<16 { warmUp.store(Self.entry(index, day: day, now: now)) }
        let before = try Self.residentBytes()
        let cache = IngestStateCache(capacity: capacity)
        for index in 0..<(2 * capacity) { cache.store(Self.entry(index, day: day, now: now)) }
        let after = try Self.residentBytes()
        withExtendedLifetime(cache) {}
        let held = Double(after - before)
        let entries = 2 * capacity
        print("entries: \(entries) (two generations of \(capacity))")
        print("resident memory added: \(BenchFormat.fixed(held / 1_048_576, digits: 2)) MB")
        print("bytes per entry: \(BenchFormat.fixed(held / Double(entries), digits: 0))")
    }

    /// This process's resident memory, from the second field of `/proc/self/statm` (pages).
    static func residentBytes() throws -> Int {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else {
            throw BenchError("cannot read /proc/self/statm (Linux only)")
        }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else {
            throw BenchError("/proc/self/statm does not hold the resident pages where expected")
        }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }

    /// An entry as an accepted ingest of an attested day leaves it, with its own heap objects (nothing shared with
    /// the other entries), as a server builds them from each request.
    static func entry(_ index: Int, day: LocalDate, now: Date) -> CachedDay {
        let walkerId = String(UUID().uuidString.prefix(28)) + String(format: "%08d", index)
        let log = StepLogRecord(
            walkerId: String(decoding: Array(walkerId.utf8), as: UTF8.self), day: day, timeZone: "Europe/Warsaw",
            reportedCount: 8_421 + index % 1_000, acceptedCount: 8_421, status: .accepted, multiplierPermille: 1_000,
            energyCredited: 8_421, attested: true, updatedAt: now, provisionalEnergy: 8_421)
        let runs = [
            StreakRun(start: day.adding(days: -40), end: day.adding(days: -20)),
            StreakRun(start: day.adding(days: -7), end: day),
        ]
        var entry = CachedDay(
            walker: WalkerRecord(
                walkerId: walkerId, lastTimeZone: "Europe/Warsaw", lastSubmissionAt: now, lifetimeSteps: 1_234_567,
                version: 42),
            day: day,
            state: DayState(
                log: log, streak: StreakNeighbourhood(day: day, runs: runs),
                pendingReconcileAt: now.addingTimeInterval(300)))
        entry.appliedSinceOvertaken = index % 2 == 0 ? 3 : nil
        return entry
    }
}
