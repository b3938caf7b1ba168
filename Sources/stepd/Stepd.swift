import ArgumentParser
import Foundation

@main
struct Stepd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stepd",
        abstract: "StepLedger: verified step ingest, streaks and Energy.",
        version: StepdVersion.description,
        subcommands: [
            Serve.self, Worker.self, Jobs.self, Operator.self, Token.self, Device.self, LocalKeys.self,
            AppCheckToken.self,
            Migrate.self, Prune.self, Backup.self, WalkerCommand.self, Healthcheck.self,
        ]
    )

    /// ArgumentParser's entry, except that a configuration error is the operator's file or environment to fix,
    /// not a misuse of the command line: it is printed as one line (`stepd: config.json:2:13: unknown key …`)
    /// without the usage text, and the process exits 1; so is a database that cannot be used (unreachable, or a
    /// schema behind this build), and any other failure of a command. Bad options still get ArgumentParser's help.
    static func main() async {
        do {
            var command = try await asyncParseAsRoot()
            if var command = command as? any AsyncParsableCommand {
                try await command.run()
            } else {
                try command.run()
            }
            try flushOutput()
        } catch {
            // ArgumentParser's own (a bad option: its message, the usage and 64; `--help` and `--version`: 0) as it
            // prints them. Anything else is a failure of the command, not of its command line (a configuration
            // error, a database that cannot be used, a port in use, a `CommandFailure`): one line, exit 1.
            guard exitCode(for: error) == .failure, !(error is ExitCode) else { exit(withError: error) }
            exitReporting(error)
        }
    }

    /// What a command printed (a secret shown once, an erasure's pseudonym) has reached stdout's reader, or the
    /// command fails: `print` ignores a failed write (a full disk, `/dev/full`, a closed pipe), and the exit would
    /// have said 0 with the output lost. Into a file or a pipe the few lines a command prints are still in the
    /// stream's buffer here, so flushing every stream (`stdout` itself cannot be named under strict concurrency)
    /// writes them and says whether that failed.
    private static func flushOutput() throws {
        guard fflush(nil) == 0 else {
            throw CommandFailure("the output could not be written to stdout (\(String(cString: strerror(errno))))")
        }
    }

    /// One `stepd:` line: Foundation's errors in their own sentence (a file that cannot be read), any other as it
    /// describes itself; line breaks become spaces.
    private static func exitReporting(_ error: any Error) -> Never {
        let text = (error as? any LocalizedError)?.errorDescription ?? String(describing: error)
        let line = text.split(whereSeparator: \.isNewline).joined(separator: " ")
        FileHandle.standardError.write(Data("stepd: \(line)\n".utf8))
        Foundation.exit(1)
    }
}

/// A command that cannot do what it was asked, for a reason the user can fix: one line, exit 1, no usage text.
struct CommandFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
