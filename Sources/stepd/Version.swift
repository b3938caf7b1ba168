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
    /// `<prefix>/bin/stepd` → `<prefix>/share/stepledger/BUILD`.
    private static var releaseBuild: String? {
        let executable = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        let prefix = executable.deletingLastPathComponent().deletingLastPathComponent()
        let file = prefix.appendingPathComponent("share/stepledger/BUILD")
        guard let text = try? String(contentsOf: file, encoding: .utf8),
            let line = text.split(separator: "\n").first, !line.isEmpty
        else { return nil }
        return String(line)
    }
}
