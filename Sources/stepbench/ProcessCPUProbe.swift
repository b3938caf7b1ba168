import Foundation

/// Reads the CPU time local processes have used (user + system) from `/proc/<pid>/stat`, so a benchmark can report
/// the server's CPU per request; with several pids (instances sharing one load), their sum. Linux only.
struct ProcessCPUProbe: Sendable {
    let pids: [Int32]
    let ticksPerSecond: Double

    /// Fails at once when a process or `/proc` cannot be read, rather than as a missing number after the load.
    init(pids: [Int32]) throws {
        guard !pids.isEmpty else { throw BenchError("no process to read the CPU time of") }
        let ticks = sysconf(Int32(_SC_CLK_TCK))
        guard ticks > 0 else { throw BenchError("sysconf(_SC_CLK_TCK) failed; cannot convert CPU ticks") }
        self.pids = pids
        self.ticksPerSecond = Double(ticks)
        _ = try microseconds()
    }

    init(pid: Int32) throws {
        try self.init(pids: [pid])
    }

    /// "process 42" or "processes 42, 43", for messages.
    var processes: String {
        (pids.count == 1 ? "process " : "processes ") + pids.map(String.init).joined(separator: ", ")
    }

    /// User plus system CPU time so far of every process, in microseconds (resolution one clock tick, usually 10 ms).
    func microseconds() throws -> Double {
        var ticks: UInt64 = 0
        for pid in pids {
            let path = "/proc/\(pid)/stat"
            let text: String
            do {
                text = try String(contentsOfFile: path, encoding: .utf8)
            } catch {
                throw BenchError("cannot read \(path): is process \(pid) running on this machine (Linux only)?")
            }
            guard let used = Self.ticks(inStat: text) else {
                throw BenchError("\(path) does not hold utime and stime where expected")
            }
            ticks += used
        }
        return Double(ticks) / ticksPerSecond * 1_000_000
    }

    /// utime + stime in clock ticks from the text of a `/proc/<pid>/stat`, nil when they are not where expected.
    /// Field 2 is the command name in parentheses and may itself hold spaces or parentheses, so the fields are
    /// counted from the last ")": the first after it is field 3, which puts utime (14) and stime (15) at 11 and 12.
    static func ticks(inStat text: String) -> UInt64? {
        guard let close = text.lastIndex(of: ")") else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let user = UInt64(fields[11]), let system = UInt64(fields[12]) else { return nil }
        return user + system
    }
}
