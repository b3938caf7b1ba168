import StepDatabase
import StepStore
import StepTestSupport
import Testing

/// A closed SQLite database refuses new work with `StoreError.unavailable`, which makes the close observable;
/// `closing(after:)` itself does not depend on the engine.
@Suite("Store.closing(after:)")
struct StoreClosingTests {
    struct BodyFailed: Error {}

    @Test("the body's result is returned and the database is closed after it")
    func closesAfterReturn() async throws {
        let test = try await TestDatabases.make(.sqlite)
        let answer = try await test.store.closing { store in try await store.transaction { _ in 42 } }
        #expect(answer == 42)
        let refusal = await #expect(throws: StoreError.self) { try await test.store.transaction { _ in 0 } }
        #expect(refusal?.isUnavailable == true)
        await test.closeQuietly()
    }

    @Test("the body's error is rethrown and the database is closed after it")
    func closesAfterThrow() async throws {
        let test = try await TestDatabases.make(.sqlite)
        await #expect(throws: BodyFailed.self) {
            try await test.store.closing { _ -> Int in throw BodyFailed() }
        }
        let refusal = await #expect(throws: StoreError.self) { try await test.store.transaction { _ in 0 } }
        #expect(refusal?.isUnavailable == true)
        await test.closeQuietly()
    }
}
