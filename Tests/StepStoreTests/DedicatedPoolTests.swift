import Foundation
import Logging
import SQLKit
import ServiceLifecycle
import StepDatabase
import StepStore
import StepTestSupport
import Testing

/// `Store.dedicatedPool`, the job worker's own pool inside `stepd serve` on PostgreSQL.
@Suite("The worker's dedicated pool")
struct DedicatedPoolTests {
    @Test(
        "nil on SQLite; on PostgreSQL a pool of its own on the same database, never more connections than asked",
        arguments: TestDatabases.kinds)
    func dedicatedPool(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        var settings = PostgresSettings()
        if let schema = test.schema { settings.startupParameters["search_path"] = schema }
        let opened = try await test.store.dedicatedPool(
            threadName: "test-worker", url: test.url, settings: settings, connections: 2, logger: Logger(label: "test"))
        guard kind == .postgres else {
            #expect(opened == nil, "SQLite's one writer thread serves every unit: no second pool")
            try await test.close()
            return
        }
        let (store, thread) = try #require(opened)
        #expect(store.kind == .postgres)
        try await withThrowingTaskGroup(of: Void.self) { services in
            for service in store.database.lifecycleServices { services.addTask { try await service.run() } }
            // What one pool writes the other reads: the same database and schema.
            _ = try await test.store.transaction { try await $0.lockWalker("walker-pool", now: Date()) }
            #expect(try await store.transaction { try await $0.walker("walker-pool") }?.walkerId == "walker-pool")
            // Six units at once, each holding its connection for 50 ms, share the two connections asked for.
            let backends = try await withThrowingTaskGroup(of: Int.self) { units in
                for _ in 0..<6 {
                    units.addTask {
                        try await store.withoutTransaction { tx in
                            try await tx.sql.raw("SELECT pg_backend_pid() AS pid FROM pg_sleep(0.05)").first()?
                                .decode(column: "pid", as: Int.self) ?? 0
                        }
                    }
                }
                return try await units.reduce(into: Set<Int>()) { $0.insert($1) }
            }
            #expect(!backends.contains(0))
            #expect((1...2).contains(backends.count), "\(backends.count) connections for a pool of 2")
            let mainBackend = try await test.store.withoutTransaction { tx in
                try await tx.sql.raw("SELECT pg_backend_pid() AS pid").first()?.decode(column: "pid", as: Int.self)
            }
            #expect(mainBackend.map { !backends.contains($0) } == true, "the pools share no connection")
            services.cancelAll()
        }
        try await thread.shutdown()
        try await test.close()
    }
}
