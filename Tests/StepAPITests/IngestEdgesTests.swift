import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import SQLKit
import StepAPI
import StepCore
import StepDatabase
import StepSettings
import StepStore
import StepTestSupport
import Testing

/// The edges of the ingest and ledger rules that no other test pins down: the escapes of a quoted
/// `Idempotency-Key`, ledger pages inside one millisecond, an allocation's bounds, the batch body's 16 MiB cap and
/// the 20 s arrival-skew tolerance.
@Suite("Ingest and ledger edges")
struct IngestEdgesTests {
    static let keyHeader = HTTPField.Name("Idempotency-Key")!
    static let replayed = HTTPField.Name("Idempotent-Replayed")!

    /// The idempotency keys stored for `walker`, sorted.
    static func storedKeys(_ harness: TestHarness, _ walker: String) async throws -> [String] {
        try await harness.store.transaction { tx in
            try await tx.sql.raw("SELECT idem_key FROM idempotency_keys WHERE walker_id = \(bind: walker)").all()
                .map { try $0.decode(column: "idem_key", as: String.self) }
        }.sorted()
    }

    // MARK: - The quoted Idempotency-Key

    @Test(
        "a quoted Idempotency-Key's escaped quote and backslash are unescaped: its body and bare forms replay it",
        arguments: TestDatabases.kinds)
    func quotedKeyEscapes(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let walker = "walker-escaped"
        let token = try await harness.token(for: walker)
        // On the wire "esc\"q\\z"; the key itself is esc"q\z.
        let quotedForm = "\"esc\\\"q\\\\z\""
        let key = "esc\"q\\z"
        try await harness.run { client in
            let quoted = try await client.ingest(
                IngestBody(count: 5000, key: nil), token: token, headers: [Self.keyHeader: quotedForm])
            #expect(quoted.status == .ok, "\(quoted.text)")
            #expect(quoted.headers[Self.replayed] == nil)
            #expect(try await Self.storedKeys(harness, walker) == [key], "the key is stored unescaped")

            // The same key in the body (JSON spells it with its own escapes): a replay of the header's key.
            let inBody = try await client.ingest(IngestBody(count: 5000, key: key), token: token)
            #expect(inBody.status == .ok, "\(inBody.text)")
            #expect(inBody.headers[Self.replayed] == "true", "the body's key is the header's key unescaped")
            #expect(inBody.body == quoted.body)
            // Both at once name one key: no mismatch, a replay.
            let both = try await client.ingest(
                IngestBody(count: 5000, key: key), token: token, headers: [Self.keyHeader: quotedForm])
            #expect(both.status == .ok, "\(both.text)")
            #expect(both.headers[Self.replayed] == "true")

            // A backslash alone: the bare token bs\only and the quoted "bs\\only" are one key.
            let bare = try await client.ingest(
                IngestBody(day: "2026-05-17", count: 4000, key: nil), token: token,
                headers: [Self.keyHeader: "bs\\only"])
            #expect(bare.status == .ok, "\(bare.text)")
            #expect(bare.headers[Self.replayed] == nil)
            let quotedBare = try await client.ingest(
                IngestBody(day: "2026-05-17", count: 4000, key: nil), token: token,
                headers: [Self.keyHeader: "\"bs\\\\only\""])
            #expect(quotedBare.status == .ok, "\(quotedBare.text)")
            #expect(quotedBare.headers[Self.replayed] == "true", "\"bs\\\\only\" is the key bs\\only")
            #expect(quotedBare.body == bare.body)

            // The 255-character limit is the unescaped key's: 253 letters and two escapes, 259 bytes on the wire.
            let letters = String(repeating: "k", count: 253)
            let longKey = letters + "\"\\"
            let longForm = "\"" + letters + "\\\"\\\\\""
            #expect(longKey.utf8.count == 255)
            #expect(longForm.utf8.count == 259)
            let longQuoted = try await client.ingest(
                IngestBody(day: "2026-05-16", count: 3000, key: nil), token: token,
                headers: [Self.keyHeader: longForm])
            #expect(longQuoted.status == .ok, "\(longQuoted.text)")
            let longInBody = try await client.ingest(
                IngestBody(day: "2026-05-16", count: 3000, key: longKey), token: token)
            #expect(longInBody.headers[Self.replayed] == "true")
            #expect(longInBody.body == longQuoted.body)

            // Three keys, each processed once: one submission and one credit per day.
            #expect(try await Self.storedKeys(harness, walker) == [longKey, "bs\\only", key].sorted())
            #expect(try await harness.count("step_submissions", walker: walker) == 3)
            #expect(try await harness.count("energy_ledger", walker: walker) == 3)
        }
    }

    @Test(
        "a malformed quoted Idempotency-Key is a 400 naming the header that writes nothing but its REFUSED row",
        arguments: TestDatabases.kinds)
    func malformedQuotedKey(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let forms = [
            // "a\b": an escape of a character other than a quote or a backslash.
            "\"a\\b\"",
            // "abc\": the closing quote escaped, so the string never ends.
            "\"abc\\\"",
            // "a"b": a quote inside that is not escaped.
            "\"a\"b\"",
            // "": empty.
            "\"\"",
            // ": a lone quote.
            "\"",
            // 254 letters and \\\\: 256 characters once unescaped.
            "\"" + String(repeating: "k", count: 254) + "\\\\\\\\\"",
        ]
        let message = "header must be a token or a quoted string of 1 to 255 printable ASCII characters"
        try await harness.run { client in
            for (index, form) in forms.enumerated() {
                // A walker each, so its tables show what this one request wrote. The body's valid key does not
                // stand in for the malformed header.
                let walker = "walker-malformed-key-\(index)"
                let token = try await harness.token(for: walker)
                let response = try await client.ingest(
                    IngestBody(key: "body-key-\(index)"), token: token, headers: [Self.keyHeader: form])
                #expect(response.status == .badRequest, "\(form): \(response.text)")
                let json = try response.json
                #expect(json["error"] == .string("INVALID_REQUEST"), "\(form)")
                #expect(json["details"]?["fields"] == .object(["Idempotency-Key": .string(message)]), "\(form)")
                try await IngestValidationTests.expectOnlyRefusalAudited(
                    harness, walker: walker, status: 400, code: "INVALID_REQUEST")
            }
        }
    }

    @Test(
        "an Idempotency-Key sent on two lines is a 400 that writes nothing, even when the lines join into a quoted key",
        arguments: TestDatabases.kinds)
    func keyOnTwoLines(kind: DatabaseKind) async throws {
        let message = "header must be a token or a quoted string of 1 to 255 printable ASCII characters"
        // "a and b" join (", ") into "a, b": one quoted key, which the body names too.
        let pairs = [("\"a", "b\""), ("k-1", "k-1")]
        let (harness, token, _) = try await RereadTests.setUp(kind)
        try await harness.run { client in
            for (first, second) in pairs {
                var twice = HTTPFields()
                twice.append(HTTPField(name: Self.keyHeader, value: first))
                twice.append(HTTPField(name: Self.keyHeader, value: second))
                let ingest = try await client.ingest(IngestBody(key: "a, b"), token: token, headers: twice)
                #expect(ingest.status == .badRequest, "\(first) \(second): \(ingest.text)")
                #expect(try ingest.json["details"]?["fields"] == .object(["Idempotency-Key": .string(message)]))
                // The re-read answer reads the header the same way, before it looks the request up.
                let body = try RereadTests.answer(["id": .string("rr-1"), "nonce": .string("n-1")], key: "a, b")
                let reread = try await client.reread(body, token: token, headers: twice)
                #expect(reread.status == .badRequest, "\(first) \(second): \(reread.text)")
                #expect(try reread.json["details"]?["fields"] == .object(["Idempotency-Key": .string(message)]))
            }
            for table in ["step_logs", "step_submissions", "energy_ledger", "idempotency_keys"] {
                #expect(try await harness.count(table) == 0, "\(table) was written")
            }
        }
    }

    // MARK: - The ledger's pages

    /// The `id`s of ledger entries, in order.
    static func ids(_ entries: [JSONValue]) -> [String] {
        var ids: [String] = []
        for entry in entries {
            if case .string(let id)? = entry["id"] { ids.append(id) }
        }
        return ids
    }

    @Test(
        "ledger entries of one millisecond page by cursor with no loss and no repeat wherever a page ends",
        arguments: TestDatabases.kinds)
    func ledgerSameMillisecond(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let walker = "walker-same-ms"
        let token = try await harness.token(for: walker)
        try await harness.run { client in
            // The clock stands still: the credit and five allocations are written in one millisecond.
            #expect(try await client.ingest(IngestBody(count: 9000), token: token).status == .ok)
            for index in 0..<5 {
                let spent = try await client.allocate(
                    AllocationTests.allocationBody(points: 100 + index, key: "same-ms-\(index)"), token: token)
                #expect(spent.status == .created, "\(spent.text)")
            }
            let whole = try await client.read("/walker/ledger?limit=200", token: token).json
            guard case .array(let all)? = whole["entries"] else { throw JSONShapeError() }
            #expect(whole["next"] == .null)
            #expect(Set(all.compactMap { $0["createdAt"] }).count == 1, "every entry in one millisecond")
            let expected = Self.ids(all)
            #expect(expected.count == 6)
            #expect(expected == expected.sorted(by: >), "ties newest id first, the order the cursor relies on")
            let stored = try await harness.store.transaction { tx in
                try await tx.sql.raw("SELECT entry_id FROM energy_ledger WHERE walker_id = \(bind: walker)").all()
                    .map { try $0.decode(column: "entry_id", as: String.self) }
            }
            #expect(Set(stored) == Set(expected))

            // Every page size from 1 to 5 puts a page boundary between entries of the same millisecond.
            for limit in 1...5 {
                var paged: [String] = []
                var pages = 0
                var uri = "/walker/ledger?limit=\(limit)"
                // Bounded: a cursor that handed out the same page again must not loop for ever.
                while pages < 10 {
                    let page = try await client.read(uri, token: token)
                    #expect(page.status == .ok, "limit \(limit): \(page.text)")
                    let json = try page.json
                    pages += 1
                    guard case .array(let entries)? = json["entries"] else { throw JSONShapeError() }
                    #expect(entries.count <= limit)
                    paged += Self.ids(entries)
                    guard case .string(let next)? = json["next"] else { break }
                    uri = "/walker/ledger?limit=\(limit)&cursor=\(next)"
                }
                #expect(paged == expected, "limit \(limit)")
                #expect(pages == (expected.count + limit - 1) / limit, "limit \(limit)")
            }
        }
    }

    // MARK: - An allocation's bounds

    static func balance(_ harness: TestHarness, _ walker: String) async throws -> Int {
        try await harness.store.transaction { try await $0.energyBalance(walkerId: walker) }
    }

    @Test(
        "allocation bounds: 10^9 points, a 128-scalar nodeId, a 255-byte key are spent; one more is a 400, no change",
        arguments: TestDatabases.kinds)
    func allocationBounds(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let walker = "walker-alloc-edge"
        let token = try await harness.token(for: walker)
        // Confirmed Energy enough for every request below, the refused ones included: no refusal is for want of it.
        let credit = 3_000_000_000
        try await harness.store.transaction { tx in
            _ = try await tx.lockWalker(walker, now: harness.clock.now)
            try await tx.appendLedgerEntry(walkerId: walker, kind: .stepCredit, amount: credit, at: harness.clock.now)
        }
        let ascii = String(repeating: "n", count: 128)
        // 128 Unicode scalars, 512 UTF-8 bytes, 256 UTF-16 units: the limit counts scalars.
        let trees = String(repeating: "🌳", count: 128)
        let longKey = String(repeating: "k", count: 255)
        let refused: [(body: ByteBuffer, field: String)] = [
            (AllocationTests.allocationBody(points: 1_000_000_001, key: "edge-points"), "points"),
            (AllocationTests.allocationBody(nodeId: ascii + "n", points: 1, key: "edge-ascii"), "nodeId"),
            (AllocationTests.allocationBody(nodeId: trees + "🌳", points: 1, key: "edge-trees"), "nodeId"),
            (AllocationTests.allocationBody(points: 2, key: longKey + "k"), "idempotencyKey"),
        ]
        // The same requests at the edge, with the refused ones' keys: a 400 claims no key.
        let accepted: [(body: ByteBuffer, nodeId: String, points: Int)] = [
            (AllocationTests.allocationBody(points: 1_000_000_000, key: "edge-points"), "node-1", 1_000_000_000),
            (AllocationTests.allocationBody(nodeId: ascii, points: 1, key: "edge-ascii"), ascii, 1),
            (AllocationTests.allocationBody(nodeId: trees, points: 1, key: "edge-trees"), trees, 1),
            (AllocationTests.allocationBody(points: 2, key: longKey), "node-1", 2),
        ]
        try await harness.run { client in
            for (body, field) in refused {
                let response = try await client.allocate(body, token: token)
                #expect(response.status == .badRequest, "\(field): \(response.text)")
                let json = try response.json
                #expect(json["error"] == .string("INVALID_REQUEST"), "\(field)")
                guard case .object(let fields)? = json["details"]?["fields"] else { throw JSONShapeError() }
                #expect(Array(fields.keys) == [field], "\(response.text)")
            }
            #expect(try await harness.count("allocations", walker: walker) == 0)
            #expect(try await harness.count("energy_ledger", walker: walker) == 1, "the credit alone")
            #expect(try await harness.count("idempotency_keys", walker: walker) == 0)
            #expect(try await Self.balance(harness, walker) == credit)

            for (body, nodeId, points) in accepted {
                let response = try await client.allocate(body, token: token)
                #expect(response.status == .created, "\(points) \(nodeId.prefix(8)): \(response.text)")
                let json = try response.json
                #expect(json["nodeId"] == .string(nodeId))
                #expect(json["points"] == .int(points))
                #expect(json["status"] == .string("confirmed"))
            }
            #expect(try await harness.count("allocations", walker: walker) == 4)
            #expect(try await Self.balance(harness, walker) == credit - 1_000_000_004)
        }
    }

    // MARK: - The batch body's cap

    /// A batch of one valid bucket, padded with JSON whitespace before its closing brace to exactly `size` bytes.
    static func paddedBatch(key: String, size: Int) throws -> ByteBuffer {
        let bucket = try JSONCoding.encode(JSONValue.object(IngestBody(key: key).fields))
        let head = "{\"buckets\":[\(bucket)]"
        var buffer = ByteBuffer()
        buffer.reserveCapacity(size)
        buffer.writeString(head)
        buffer.writeRepeatingByte(UInt8(ascii: " "), count: size - head.utf8.count - 1)
        buffer.writeString("}")
        return buffer
    }

    @Test(
        "a batch body is capped at 16 MiB whatever maxBodyBytes × batchMaxBuckets: at it runs, a byte over is 413",
        arguments: TestDatabases.kinds)
    func batchBodyCap(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind) { $0.http.maxBodyBytes = 2 * 1024 * 1024 }
        let cap = 16 * 1024 * 1024
        // 2 MiB × 14 buckets is 28 MiB: the cap, not the product, is the limit here.
        #expect(harness.configuration.http.maxBodyBytes * harness.configuration.ingestBatchMaxBuckets > cap)
        let walker = "walker-16mib"
        let token = try await harness.token(for: walker)
        try await harness.run { client in
            let overBody = try Self.paddedBatch(key: "cap-over", size: cap + 1)
            #expect(overBody.readableBytes == cap + 1)
            let over = try await client.ingestBatch(raw: overBody, token: token)
            #expect(over.status == .contentTooLarge)
            let json = try over.json
            #expect(json["error"] == .string("PAYLOAD_TOO_LARGE"))
            #expect(json["message"] == .string("Request body exceeds 16777216 bytes."))
            #expect(json["details"] == .object(["limitBytes": .int(cap)]))
            #expect(json["results"] == nil)
            for table in ["step_logs", "step_submissions", "energy_ledger", "idempotency_keys"] {
                #expect(try await harness.count(table, walker: walker) == 0, "\(table) was written")
            }
            let logs = try await harness.store.transaction { try await $0.attestationLogs(walkerId: walker) }
            #expect(logs.map(\.route) == ["/step/ingest:batch"])
            #expect(logs.map(\.status) == [413])
            #expect(logs.map(\.verdict) == [.refused])
            #expect(logs.map(\.reasons) == [["PAYLOAD_TOO_LARGE"]])

            let atCapBody = try Self.paddedBatch(key: "cap-at", size: cap)
            #expect(atCapBody.readableBytes == cap)
            let atCap = try await client.ingestBatch(raw: atCapBody, token: token)
            #expect(atCap.status == .ok, "\(atCap.text.prefix(300))")
            #expect(try IngestBatchTests.results(atCap).map(\.status) == [200])
            #expect(try await harness.count("step_submissions", walker: walker) == 1)
            #expect(try await harness.count("energy_ledger", walker: walker) == 1)
        }
    }

    // MARK: - The arrival-skew tolerance

    /// The arrival of each of `walker`'s submissions for 2026-05-18, by its count, in milliseconds since 1970.
    static func arrivals(_ harness: TestHarness, _ walker: String) async throws -> [Int: Int] {
        let submissions = try await harness.store.transaction {
            try await $0.submissions(walkerId: walker, day: LocalDate(iso: "2026-05-18")!)
        }
        return Dictionary(uniqueKeysWithValues: submissions.map { ($0.count, $0.receivedAt.millisecondsSince1970) })
    }

    @Test(
        "a last arrival exactly 20 s ahead of the clock orders the next a millisecond after it; 20.001 s, not",
        arguments: TestDatabases.kinds)
    func arrivalSkewEdge(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let start = harness.clock.now.millisecondsSince1970
        let atEdge = try await harness.token(for: "walker-skew-at")
        let pastEdge = try await harness.token(for: "walker-skew-past")
        try await harness.run { client in
            for (walker, token) in [("walker-skew-at", atEdge), ("walker-skew-past", pastEdge)] {
                let first = try await client.ingest(IngestBody(count: 5_000, key: "\(walker)-1"), token: token)
                #expect(first.status == .ok, "\(first.text)")
            }
            // The clock now reads exactly 20 s before the walker's last arrival (as an instance whose clock is
            // behind would): within the tolerance, the next arrival is a millisecond after the last.
            harness.clock.set(Date(millisecondsSince1970: start - 20_000))
            let at = try await client.ingest(IngestBody(count: 6_000, key: "walker-skew-at-2"), token: atEdge)
            #expect(at.status == .ok, "\(at.text)")
            // A millisecond further behind, the last arrival is past the tolerance: the clock's own time.
            harness.clock.set(Date(millisecondsSince1970: start - 20_001))
            let past = try await client.ingest(IngestBody(count: 6_000, key: "walker-skew-past-2"), token: pastEdge)
            #expect(past.status == .ok, "\(past.text)")

            #expect(try await Self.arrivals(harness, "walker-skew-at") == [5_000: start, 6_000: start + 1])
            #expect(try await Self.arrivals(harness, "walker-skew-past") == [5_000: start, 6_000: start - 20_001])
        }
    }
}
