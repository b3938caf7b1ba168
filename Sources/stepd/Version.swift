import Foundation

/// What `stepd --version` prints: the version of this source tree, and the commit it was built from when the
/// binary came from `scripts/release` (which writes `share/stepledger/BUILD` beside `bin/stepd` in the archive).
enum StepdVersion {
    static let version = "0.1.0"

    /// `0.1.0 (commit 1a2b3c4d…, release build)`, or `0.1.0 (development build)` outside a release archive.
    static var description: String {
        guard let build = releaseBuild else { return "\(version) (development build)" }
        return "\(version) (\(build))"
    }

    /// The BUILD file's first line (`commit <sha>, <configuration> build`), read from the release layout
    /// `<prefix>/bin/stepd` → `<prefix>/share/stepledger/BUILD`. The executable is the running one
    /// (`/proc/self/exe`), not `argv[0]`, which is only `stepd` when it was found through `PATH` or a symlink.
    private static var releaseBuild: String? {
        let running = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
        let executable = URL(fileURLWithPath: running ?? CommandLine.arguments[0]).resolvingSymlinksInPath()
        let prefix = executable.deletingLastPathComponent().deletingLastPathComponent()
        let file = prefix.appendingPathComponent("share/stepledger/BUILD")
        guard let text = try? String(contentsOf: file, encoding: .utf8),
            let line = text.split(separator: "\n").first, !line.isEmpty
        else { return nil }
        return String(line)
    }
}
