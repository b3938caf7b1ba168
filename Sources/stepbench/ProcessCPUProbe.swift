import Foundation

/// Reads the CPU time a local process has used (user + system) from `/proc/<pid>/stat`, so a benchmark can report
/// the server's CPU per request. Linux only.
struct ProcessCPUProbe: Sendable {
    let pid: Int32
    let ticksPerSecond: Double

    /// Fails at once when the process or `/proc` cannot be read, rather than as a missing number after the load.
    init(pid: Int32) throws {
        let ticks = sysconf(Int32(_SC_CLK_TCK))
        guard ticks > 0 else { throw BenchError("sysconf(_SC_CLK_TCK) failed; cannot convert CPU ticks") }
        self.pid = pid
        self.ticksPerSecond = Double(ticks)
        _ = try microseconds()
    }

    /// User plus system CPU time so far, in microseconds (resolution one clock tick, usually 10 ms).
    func microseconds() throws -> Double {
        let path = "/proc/\(pid)/stat"
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw BenchError("cannot read \(path): is process \(pid) running on this machine (Linux only)?")
        }
        guard let ticks = Self.ticks(inStat: text) else {
            throw BenchError("\(path) does not hold utime and stime where expected")
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
