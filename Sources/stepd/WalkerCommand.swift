import ArgumentParser
import Foundation
import StepDatabase
import StepSettings
import StepStore

/// `stepd walker`: what an operator does to one walker's data from the command line.
struct WalkerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "walker", abstract: "Act on one walker's data (deletion requests).",
        subcommands: [Erase.self])

    struct Erase: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Erase one walker's personal data for a deletion request, keeping the ledger anonymised.",
            discussion: """
                In one transaction: deletes the walker's submissions, health records, attestation logs, App Attest \
                keys, nonces, events, re-read requests, idempotency keys (with their stored answers), rate-limit \
                windows and pending or dead jobs; moves the day logs, streak runs, ledger entries, allocations, \
                review entries (without notes or re-read evidence; open ones closed as erased) and the walkers row \
                (without zone or last submission, suspended) to a random pseudonym, and writes a walker.erase \
                audit row naming it. The admin audit is append-only: its rows that name the walker stay. Refused \
                while a job of the walker runs. Erasing again finds nothing and changes nothing. On PostgreSQL each \
                statement may run for --statement-timeout and the whole erasure twice that \
                (database.statementTimeoutMs is sized for requests; a walker with years of data has many rows to \
                move).
                """)

        @Argument(help: "The walker id (the session token's sub).")
        var walkerId: String

        @Flag(help: "Erase without asking: the erasure cannot be undone.")
        var yes = false

        @Option(
            help: """
                PostgreSQL: how long one statement of the erasure may run, in seconds (1 to 86400; never below \
                database.statementTimeoutMs). The walker's requests wait for the erasure meanwhile.
                """)
        var statementTimeout = 600

        @OptionGroup var common: CommonOptions

        func validate() throws {
            // As a session token's sub: an empty id (an unset shell variable) names no walker.
            guard !walkerId.isEmpty, walkerId.utf8.count <= 128 else {
                throw ValidationError("the walker id must be 1 to 128 bytes")
            }
            guard (1...86_400).contains(statementTimeout) else {
                throw ValidationError("--statement-timeout must be 1 to 86400 seconds")
            }
        }

        func run() async throws {
            // Stored ids are in Unicode's composed form (NFC; the server refuses a token whose `sub` is not): an id
            // pasted in decomposed form (`e` + U+0301 for `é`, as some clipboards give it) names the same walker.
            let walkerId = walkerId.precomposedStringWithCanonicalMapping
            guard yes else {
                throw CommandFailure(
                    "erasing walker \(walkerId) cannot be undone; run again with --yes to erase it")
            }
            var configuration = try await common.load()
            configuration.postgres = configuration.postgres.withStatementTimeout(atLeastSeconds: statementTimeout)
            let erasure = try await configuration.withStore(label: "stepd.walker") { store in
                do {
                    return try await store.eraseWalker(walkerId, actor: .commandLine, at: Date())
                } catch let refusal as WalkerErasureRefusal {
                    throw CommandFailure(refusal.description)
                }
            }
            guard let pseudonym = erasure.pseudonym else {
                print("nothing holds walker \(walkerId): erased already, or never seen")
                return
            }
            let deleted = erasure.deleted.values.reduce(0, +)
            let kept = erasure.pseudonymised.values.reduce(0, +)
            print("erased walker \(walkerId): \(deleted) rows deleted, \(kept) rows kept as \(pseudonym)")
        }
    }
}
