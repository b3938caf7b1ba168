import Foundation
import Logging
import SQLKit
import StepDatabase
import StepTestSupport
import Testing

/// `database.url`'s `sslmode` as libpq reads it, against a PostgreSQL server of the test's own that serves TLS with a
/// certificate for `localhost` from an authority of its own (the way a Debian cluster's self-signed certificate, or a
/// managed database's private authority, looks to a client).
@Suite("PostgreSQL TLS: sslmode and sslrootcert")
struct PostgresTLSTests {
    @Test(
        "prefer (the default) and require encrypt without checking the certificate, verify-ca checks its authority, verify-full also its name; a failed check is named at once",
        .enabled(if: ThrowawayCluster.isAvailable), .timeLimit(.minutes(3)))
    func modes() async throws {
        let cluster = try await ThrowawayCluster(tls: true)
        defer { cluster.destroy() }
        let root = cluster.rootCertificateFile
        let byAddress = "postgres://postgres@127.0.0.1:\(cluster.port)/postgres"
        let byName = "postgres://postgres@localhost:\(cluster.port)/postgres"

        /// Whether the connection `url` opens is encrypted, as the server sees it.
        func encrypted(_ url: String) async throws -> Bool {
            let database = try await DatabaseOpener.open(url: url, logger: Logger(label: "test"))
            do {
                let ssl = try await database.withConnection {
                    try await $0.raw("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").first()?
                        .decode(column: "ssl", as: Bool.self)
                }
                try await database.close()
                guard let ssl else { throw StoreError.unavailable("pg_stat_ssl has no row for the session") }
                return ssl
            } catch {
                try? await database.close()
                throw error
            }
        }
        #expect(try await encrypted(byAddress), "prefer: the default encrypts when the server offers TLS")
        #expect(try await encrypted(byAddress + "?sslmode=require"))
        #expect(try await !encrypted(byAddress + "?sslmode=disable"))
        #expect(try await encrypted(byAddress + "?sslmode=verify-ca&sslrootcert=\(root)"))
        #expect(try await encrypted(byName + "?sslmode=verify-full&sslrootcert=\(root)"))

        // Refused at once, naming the check: the certificate names localhost, not 127.0.0.1; the system's
        // authorities did not sign it.
        for (url, mode) in [
            (byAddress + "?sslmode=verify-full&sslrootcert=\(root)", "verify-full"),
            (byName + "?sslmode=verify-ca", "verify-ca"),
            (byName + "?sslmode=verify-full&sslrootcert=system", "verify-full"),
        ] {
            let started = ContinuousClock.now
            await #expect {
                _ = try await encrypted(url)
            } throws: { error in
                let detail = (error as? StoreError)?.detail ?? "\(error)"
                return detail.contains("PostgreSQL TLS") && detail.contains("sslmode=\(mode)")
            }
            #expect(ContinuousClock.now - started < .seconds(15), "named at once, not retried by the pool")
        }
        // The pool checks as the first connection does: opened without that connection, the first statement over
        // 127.0.0.1 under verify-full fails.
        var patient = PostgresSettings()
        patient.connectTimeoutSeconds = 2
        let unchecked = try PostgreSQLDatabase.open(
            url: byAddress + "?sslmode=verify-full&sslrootcert=\(root)", settings: patient,
            logger: Logger(label: "test"))
        await #expect(throws: (any Error).self) {
            try await unchecked.withConnection { try await $0.raw("SELECT 1").run() }
        }
        try await unchecked.close()
        // A file of no certificates as sslrootcert is named before any connection.
        let empty = NSTemporaryDirectory() + "stepledger-no-ca-\(UUID().uuidString).pem"
        try "not a certificate\n".write(toFile: empty, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: empty) }
        await #expect {
            _ = try await encrypted(byName + "?sslmode=verify-full&sslrootcert=\(empty)")
        } throws: { error in
            ((error as? StoreError)?.detail ?? "").contains("sslrootcert \(empty)")
        }
    }
}
