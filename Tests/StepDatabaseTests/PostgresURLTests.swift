import Foundation
import Logging
import SQLKit
import StepDatabase
import StepTestSupport
import Testing

/// `PostgresURL`: what `database.url` and `database.readReplicas` may say, and a real connection over the server's
/// Unix-domain socket.
@Suite("PostgreSQL URLs: TCP hosts and Unix-domain sockets")
struct PostgresURLTests {
    @Test("a TCP URL gives its host, port, role, password, database and TLS mode; the defaults fill what it leaves out")
    func tcp() throws {
        let full = try PostgresURL(parsing: "postgres://led%40ger:p%2Fw@db.internal:6432/steps?sslmode=require")
        #expect(full.address == .tcp(host: "db.internal", port: 6432))
        #expect(full.username == "led@ger" && full.password == "p/w" && full.database == "steps")
        #expect(full.tls == .require)
        #expect(full.addressDescription == "db.internal:6432")
        // Each part is decoded once: a percent sign is written %25, and %2541 is the three characters %41.
        let percent = try PostgresURL(parsing: "postgres://u%25s:p%25ss%2541@db.internal/d%25b%2541")
        #expect(percent.username == "u%s" && percent.password == "p%ss%41" && percent.database == "d%b%41")
        let verified = try PostgresURL(
            parsing: "postgres://db.internal/steps?sslmode=verify-full&sslrootcert=/etc/ca.pem")
        #expect(verified.tls == .verifyFull && verified.rootCertificateFile == "/etc/ca.pem")
        let system = try PostgresURL(parsing: "postgres://db.internal/steps?sslmode=verify-ca&sslrootcert=system")
        #expect(system.tls == .verifyCA && system.rootCertificateFile == nil)
        let bare = try PostgresURL(parsing: "postgresql://10.0.0.2")
        #expect(bare.address == .tcp(host: "10.0.0.2", port: 5432))
        #expect(bare.username == "postgres" && bare.password == nil && bare.database == nil && bare.tls == .prefer)
    }

    @Test(
        "a connection may reach an unauthenticated server over a network only by TCP beyond loopback, in a mode that checks no certificate"
    )
    func unauthenticatedOverNetwork() throws {
        for (url, exposed) in [
            ("postgres://db.internal/steps", true), ("postgres://db.internal/steps?sslmode=require", true),
            ("postgres://10.0.0.2/steps?sslmode=disable", true), ("postgres://[2001:db8::1]/steps", true),
            ("postgres://db.internal/steps?sslmode=verify-ca", false),
            ("postgres://db.internal/steps?sslmode=verify-full", false), ("postgres://127.0.0.1/steps", false),
            ("postgres://localhost/steps?sslmode=disable", false), ("postgres://[::1]/steps", false),
            ("postgres://u@/steps?host=/run/postgresql", false), ("postgres://127.1.2.3/steps", false),
            ("postgres://LOCALHOST/steps", false), ("postgres://localhost./steps", false),
            ("postgres://[0:0:0:0:0:0:0:1]/steps", false), ("postgres://[::ffff:127.0.0.1]/steps", false),
            ("postgres://127.0.0.1.nip.io/steps", true), ("postgres://127.db.example/steps", true),
            ("postgres://128.0.0.1/steps", true), ("postgres://[::2]/steps", true),
        ] {
            #expect(try PostgresURL(parsing: url).unauthenticatedOverNetwork == exposed, "\(url)")
        }
    }

    @Test("a host parameter that is an absolute path is the socket's folder; the port names the socket file")
    func socket() throws {
        let url = try PostgresURL(parsing: "postgres://ledger@/steps?host=/var/run/postgresql")
        #expect(url.address == .socket(path: "/var/run/postgresql/.s.PGSQL.5432"))
        #expect(url.username == "ledger" && url.database == "steps")
        #expect(url.tls == .disable, "TLS is not spoken over a socket")
        #expect(url.addressDescription == "/var/run/postgresql/.s.PGSQL.5432")
        let withPort = try PostgresURL(parsing: "postgres:///steps?host=/tmp/pg/&port=6543&sslmode=prefer")
        #expect(withPort.address == .socket(path: "/tmp/pg/.s.PGSQL.6543"))
        // libpq's rule: the host parameter wins over a host in the URL's authority.
        let both = try PostgresURL(parsing: "postgres://ledger@db.internal:7000/steps?host=/sock")
        #expect(both.address == .socket(path: "/sock/.s.PGSQL.7000"))
    }

    @Test(
        "a URL that names no server, a relative socket folder, TLS required over a socket, a bad port or mode is refused without repeating the URL",
        arguments: [
            ("mysql://u:hunter2@db/steps", "not a postgres:// URL"),
            ("postgres://u:hunter2@/steps", "needs a host"),
            ("postgres://u:hunter2@/steps?host=run/postgresql", "absolute path"),
            ("postgres://u:hunter2@/steps?host=/run/postgresql&sslmode=require", "sslmode=require"),
            ("postgres://u:hunter2@db/steps?sslmode=verify", "sslmode must be"),
            ("postgres://u:hunter2@/steps?host=/run/postgresql&sslmode=verify-full", "sslmode=verify-full"),
            ("postgres://u:hunter2@db/steps?sslmode=require&sslrootcert=/etc/ca.pem", "sslrootcert needs"),
            ("postgres://u:hunter2@db/steps?sslrootcert=/etc/ca.pem", "sslrootcert needs"),
            ("postgres://u:hunter2@db/steps?sslmode=verify-ca&sslrootcert=", "sslrootcert must name"),
            ("postgres://u:hunter2@/steps?host=/run&port=fifty", "port must be a number"),
            ("postgres://u:hunter2@/steps?host=/run&port=70000", "port is out of range"),
        ])
    func refused(url: String, reason: String) {
        do {
            _ = try PostgresURL(parsing: url)
            Issue.record("\(reason): accepted")
        } catch {
            #expect(error.detail.contains(reason), "\(error.detail)")
            #expect(!error.detail.contains("hunter2"))
        }
    }

    @Test(
        "over the socket the database is reached without TCP (no server address), over the URL's host with it",
        .enabled(if: TestDatabases.postgresSocketURL != nil))
    func connectsOverTheSocket() async throws {
        let socketURL = try #require(TestDatabases.postgresSocketURL)
        let tcpURL = try #require(TestDatabases.postgresURL)
        for (url, overSocket) in [(socketURL, true), (tcpURL, false)] {
            let database = try PostgreSQLDatabase.open(
                url: url, settings: PostgresSettings(), logger: Logger(label: "test"))
            do {
                let local = try await database.withConnection { sql in
                    try await sql.raw("SELECT inet_server_addr() IS NULL AS local").first()?
                        .decode(column: "local", as: Bool.self)
                }
                #expect(local == overSocket, "\(overSocket ? "socket" : "TCP")")
            } catch {
                try? await database.close()
                throw error
            }
            try await database.close()
        }
    }

    @Test("the opener refuses a URL of another scheme without repeating it")
    func unknownScheme() async throws {
        for url in [
            "Postgres://ledger:hunter2@db.example/ledger", "mysql://ledger:hunter2@db.example/ledger",
            "postgres:/ledger:hunter2@db.example:5432/ledger", "postgres:ledger:hunter2@db", "POSTGRESQL:/x:hunter2@db",
        ] {
            do {
                let database = try await DatabaseOpener.open(url: url, logger: Logger(label: "test"))
                try await database.close()
                Issue.record("\(url) was opened")
            } catch let error as StoreError {
                #expect(error.description.hasPrefix("database.url: the URL's scheme must be"))
                #expect(!error.description.contains("hunter2"))
            }
        }
        // The scheme lost or mistyped past recognition: the credentials' @ gives it away.
        for url in ["postgres//ledger:hunter2@db.example/ledger", "ledger:hunter2@db.example:5432/ledger"] {
            await #expect {
                try await DatabaseOpener.open(url: url, logger: Logger(label: "test")).close()
            } throws: { error in
                let text = (error as? StoreError)?.description ?? ""
                return text.hasPrefix("database.url: a path with an @") && !text.contains("hunter2")
            }
        }
        // PostgreSQL's key=value connection string, which would otherwise be made a SQLite file of that name.
        for url in [
            "host=db.internal user=app password=hunter2 dbname=ledger", "dbname=ledger", "HOST=db port=5432",
            "host = db.internal user = app password = hunter2 dbname = ledger", "dbname =ledger",
        ] {
            await #expect {
                try await DatabaseOpener.open(url: url, logger: Logger(label: "test")).close()
            } throws: { error in
                let text = (error as? StoreError)?.description ?? ""
                return text.hasPrefix("database.url: a path of key=value words") && !text.contains("hunter2")
            }
        }
        #expect(!FileManager.default.fileExists(atPath: "dbname=ledger"), "no file was made")
        #expect(DatabaseOpener.problem("./data/mode=fast/ledger.sqlite") == nil, "a path with another = is a path")
        #expect(DatabaseOpener.problem("file:ledger.sqlite?mode=rwc") == nil)
        #expect(DatabaseOpener.problem("sqlite:///tmp/odd@name.sqlite") == nil, "the way to name such a file")
        #expect(DatabaseOpener.problem("./ledger.sqlite") == nil)
        // The file a SQLite URL names on disk, a file: URI read as its path.
        #expect(DatabaseOpener.sqliteFilePath("sqlite:///data/a.sqlite") == "/data/a.sqlite")
        #expect(DatabaseOpener.sqliteFilePath("file:/data/a%40b.sqlite?mode=rwc") == "/data/a@b.sqlite")
        #expect(DatabaseOpener.sqliteFilePath("file://localhost/data/a.sqlite#x") == "/data/a.sqlite")
        #expect(DatabaseOpener.sqliteFilePath("file:ledger.sqlite") == "ledger.sqlite")
        // As SQLite reads them: an escape that is not two hex digits stays as written, and %00 ends the path.
        #expect(DatabaseOpener.sqliteFilePath("file:/srv/my%20data/100%.sqlite") == "/srv/my data/100%.sqlite")
        #expect(DatabaseOpener.sqliteFilePath("file:/srv/a.sqlite%00junk") == "/srv/a.sqlite")
        #expect(DatabaseOpener.sqliteFilePath("postgres://db/ledger") == nil)
        #expect(DatabaseOpener.problem("sqlite:///tmp/ledger.sqlite") == nil)
        #expect(DatabaseOpener.problem("postgresql://db.example/ledger") == nil)
        // A file whose name only starts with the word is a file.
        #expect(DatabaseOpener.problem("postgres-shadow.sqlite") == nil)
        #expect(DatabaseOpener.problem("PostgresCopy.db") == nil)
    }
}
