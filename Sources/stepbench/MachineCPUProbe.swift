import Foundation

/// Reads how busy the whole machine's CPUs have been (the aggregate `cpu` line of `/proc/stat`), so a phase can say
/// whether it filled the machine. Linux only: where `/proc/stat` cannot be read, every reading is nil and the figure
/// is left out.
enum MachineCPUProbe {
    /// CPU time in clock ticks since boot: all of it, and the part not idle or waiting for I/O.
    struct Reading: Sendable {
        var total: UInt64
        var busy: UInt64
    }

    /// The aggregate line now, or nil when it cannot be read.
    static func reading() -> Reading? {
        guard let text = try? String(contentsOfFile: "/proc/stat", encoding: .utf8) else { return nil }
        return Self.parse(text)
    }

    /// Busy ÷ total between two readings (0…1), nil when no tick passed.
    static func busyFraction(from start: Reading, to end: Reading) -> Double? {
        guard end.total > start.total, end.busy >= start.busy else { return nil }
        return Double(end.busy - start.busy) / Double(end.total - start.total)
    }

    /// The first line, `cpu  user nice system idle iowait irq softirq steal …`: idle and iowait are not busy; guest
    /// time is already counted in user and nice, so only the first eight fields are summed.
    static func parse(_ text: String) -> Reading? {
        guard let line = text.split(separator: "\n", maxSplits: 1).first, line.hasPrefix("cpu ") else { return nil }
        let fields = line.split(separator: " ").dropFirst().prefix(8).compactMap { UInt64($0) }
        guard fields.count >= 5 else { return nil }
        let total = fields.reduce(0, +)
        return Reading(total: total, busy: total - fields[3] - fields[4])
    }
}
