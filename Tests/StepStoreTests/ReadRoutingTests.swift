import StepDatabase
import StepStore
import Testing

@Suite("WAL positions")
struct WALPositionTests {
    @Test(
        "PostgreSQL's X/Y text reads as the high and low 32 bits",
        arguments: [
            ("0/0", UInt64(0)), ("0/3015FF0", 0x0301_5FF0), ("16/B374D848", 0x16_B374_D848),
            ("FFFFFFFF/FFFFFFFF", UInt64.max), ("1/0", 0x1_0000_0000), ("a/b", 0xA_0000_000B),
        ])
    func parses(text: String, offset: UInt64) throws {
        let position = try #require(WALPosition(text: text))
        #expect(position.offset == offset)
        #expect(WALPosition(text: position.description) == position)
    }

    @Test(
        "anything else is refused",
        arguments: ["", "/", "0/", "/0", "0", "0/0/0", "1G/0", "0/123456789", "-1/0", " 0/0", "0/0 ", "+1/0", "0x1/0"])
    func refuses(text: String) {
        #expect(WALPosition(text: text) == nil)
    }

    @Test("positions compare as offsets, not as text")
    func compares() throws {
        let texts = ["0/FFFFFFFF", "1/0", "0/A", "0/9", "A/0", "9/FFFFFFFF"]
        let sorted = try texts.map { try #require(WALPosition(text: $0)) }.sorted().map(\.description)
        #expect(sorted == ["0/9", "0/A", "0/FFFFFFFF", "1/0", "9/FFFFFFFF", "A/0"])
    }
}

@Suite("Read routing")
struct ReadRoutingTests {
    let start = ContinuousClock.now

    func at(_ milliseconds: Int) -> ContinuousClock.Instant { start + .milliseconds(milliseconds) }

    func position(_ offset: UInt64) -> WALPosition { WALPosition(offset: offset) }

    @Test("without replicas, or before any poll, every read goes to the primary")
    func noReplicas() {
        var none = ReadRouting(replicaCount: 0)
        #expect(none.target(.walker("w"), at: at(0)) == .primary)
        var unpolled = ReadRouting(replicaCount: 2)
        #expect(unpolled.target(.walker("w"), at: at(0)) == .primary)
        #expect(unpolled.target(.instance, at: at(0)) == .primary)
    }

    @Test("a walker reads from a replica only once it has replayed the walker's last commit")
    func readYourWrites() {
        var routing = ReadRouting(replicaCount: 1)
        routing.polled(0, replayed: position(100), at: at(0))
        #expect(routing.target(.walker("alice"), at: at(1)) == .replica(0))
        routing.committed(at: position(150), walkers: ["alice"])
        #expect(routing.target(.walker("alice"), at: at(2)) == .primary)
        // Another walker is not held back by alice's write.
        #expect(routing.target(.walker("bob"), at: at(2)) == .replica(0))
        routing.polled(0, replayed: position(149), at: at(3))
        #expect(routing.target(.walker("alice"), at: at(4)) == .primary)
        routing.polled(0, replayed: position(150), at: at(5))
        #expect(routing.target(.walker("alice"), at: at(6)) == .replica(0))
    }

    @Test("a walker's position only rises: an older commit recorded late does not lower it")
    func maxOfPositions() {
        var routing = ReadRouting(replicaCount: 1)
        routing.committed(at: position(300), walkers: ["alice"])
        routing.committed(at: position(200), walkers: ["alice"])
        #expect(routing.requirement(.walker("alice")) == position(300))
        routing.polled(0, replayed: position(250), at: at(0))
        #expect(routing.target(.walker("alice"), at: at(1)) == .primary)
    }

    @Test("operators' lists wait for every commit through the instance, walker or not")
    func instanceFloor() {
        var routing = ReadRouting(replicaCount: 1)
        routing.committed(at: position(120), walkers: ["alice"])
        routing.committed(at: position(180), walkers: [])
        routing.polled(0, replayed: position(150), at: at(0))
        #expect(routing.target(.instance, at: at(1)) == .primary)
        #expect(routing.target(.walker("bob"), at: at(1)) == .replica(0))
        routing.polled(0, replayed: position(180), at: at(2))
        #expect(routing.target(.instance, at: at(3)) == .replica(0))
    }

    @Test("the replica chosen is one that has caught up; replicas that have take turns")
    func choosesAmongCaughtUp() {
        var routing = ReadRouting(replicaCount: 3)
        routing.committed(at: position(500), walkers: ["alice"])
        routing.polled(0, replayed: position(400), at: at(0))
        routing.polled(1, replayed: position(500), at: at(0))
        routing.polled(2, replayed: position(600), at: at(0))
        var chosen: [ReadTarget] = []
        for step in 1...4 { chosen.append(routing.target(.walker("alice"), at: at(step))) }
        #expect(chosen == [.replica(1), .replica(2), .replica(1), .replica(2)])
        // A walker with no write here may use all three.
        let others = Set((5...10).map { routing.target(.walker("bob"), at: at($0)) })
        #expect(others == [.replica(0), .replica(1), .replica(2)])
    }

    @Test("a replica that failed, or whose last poll is stale, or that is no standby, is skipped")
    func unusableReplicas() {
        var routing = ReadRouting(replicaCount: 2, staleAfter: .seconds(2))
        routing.polled(0, replayed: position(100), at: at(0))
        routing.polled(1, replayed: position(100), at: at(0))
        #expect(routing.failed(0, at: at(10)) == true)
        #expect(routing.failed(0, at: at(11)) == false, "already unusable: nothing new to say")
        #expect(Set((0..<4).map { routing.target(.walker("w"), at: at(20 + $0)) }) == [.replica(1)])
        // Replica 1 is not polled for longer than staleAfter: nothing is left but the primary.
        #expect(routing.target(.walker("w"), at: at(2_001)) == .primary)
        routing.polled(0, replayed: position(100), at: at(2_002))
        #expect(routing.target(.walker("w"), at: at(2_003)) == .replica(0))
        routing.polled(0, replayed: nil, at: at(2_004))
        #expect(routing.target(.walker("w"), at: at(2_005)) == .primary)
    }

    @Test("positions every replica that answered has passed are dropped, and the floor keeps a returning one honest")
    func pruning() {
        var routing = ReadRouting(replicaCount: 2)
        routing.committed(at: position(100), walkers: ["alice"])
        routing.committed(at: position(200), walkers: ["bob"])
        routing.polled(0, replayed: position(150), at: at(0))
        routing.polled(1, replayed: position(250), at: at(0))
        #expect(routing.walkers == ["bob": position(200)], "alice's commit is on both replicas")
        #expect(routing.forgotten == position(100))
        // Replica 0 goes away; replica 1 alone decides what is dropped.
        routing.failed(0, at: at(1))
        routing.polled(1, replayed: position(260), at: at(2))
        #expect(routing.walkers.isEmpty)
        #expect(routing.forgotten == position(200))
        // Back at a position behind what was dropped: no walker may read from it until it passes the floor.
        routing.polled(0, replayed: position(190), at: at(3))
        routing.polled(1, replayed: nil, at: at(3))
        #expect(routing.target(.walker("bob"), at: at(4)) == .primary)
        #expect(routing.target(.walker("carol"), at: at(4)) == .primary)
        routing.polled(0, replayed: position(200), at: at(5))
        #expect(routing.target(.walker("bob"), at: at(6)) == .replica(0))
    }

    @Test("the map is bounded: past its capacity the older half becomes the floor")
    func capacity() {
        var routing = ReadRouting(replicaCount: 1, capacity: 10)
        for index in 1...11 { routing.committed(at: position(UInt64(index) * 10), walkers: ["w\(index)"]) }
        #expect(routing.walkers.count <= 10)
        #expect(routing.walkers["w11"] == position(110))
        #expect(routing.walkers["w1"] == nil)
        #expect(routing.forgotten >= position(10))
        // A forgotten walker is held to the floor, never less.
        #expect(routing.requirement(.walker("w1")) == routing.forgotten)
        #expect(routing.requirement(.walker("never-wrote")) == routing.forgotten)
        for index in 1...11 {
            let required = routing.requirement(.walker("w\(index)")) ?? .zero
            #expect(required >= position(UInt64(index) * 10))
        }
    }

    @Test("a commit at an unknown position pins its walkers and operators' lists to the primary until resolved")
    func unknownCommits() throws {
        var routing = ReadRouting(replicaCount: 1)
        routing.polled(0, replayed: position(1_000), at: at(0))
        #expect(routing.unresolvedCommits == nil)
        routing.committedAtUnknownPosition(walkers: ["alice"])
        let first = try #require(routing.unresolvedCommits)
        #expect(routing.target(.walker("alice"), at: at(1)) == .primary)
        #expect(routing.target(.instance, at: at(1)) == .primary)
        #expect(routing.target(.walker("bob"), at: at(1)) == .replica(0))
        // Reported again while its position is read: that position does not stand for the second commit.
        routing.committedAtUnknownPosition(walkers: ["alice"])
        routing.resolveUnknownCommits(through: first, at: position(1_100))
        #expect(routing.target(.walker("alice"), at: at(2)) == .primary)
        let second = try #require(routing.unresolvedCommits)
        routing.resolveUnknownCommits(through: second, at: position(1_200))
        #expect(routing.unresolvedCommits == nil)
        #expect(routing.requirement(.walker("alice")) == position(1_200))
        #expect(routing.target(.walker("alice"), at: at(3)) == .primary)
        routing.polled(0, replayed: position(1_200), at: at(4))
        #expect(routing.target(.walker("alice"), at: at(5)) == .replica(0))
        #expect(routing.target(.instance, at: at(5)) == .replica(0))
    }
}
