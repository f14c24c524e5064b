#!/usr/bin/env node
// Reads one rosbag2 MCAP file the way Foxglove does and prints what it found as JSON.
//
// Why Foxglove's own libraries: the recorder promises bags that Foxglove opens, and Foxglove
// reads MCAP with @mcap/core (chunk decompression from @mcap/support), parses each channel's
// `ros2msg` schema text with @foxglove/rosmsg and decodes CDR with
// @foxglove/rosmsg2-serialization. Checking the bag with those same packages catches what the
// Python readers forgive (a schema text that does not match the payload, a type name Foxglove's
// panels do not know, a summary that disagrees with the data).
//
// Usage: node read_bag.mjs FILE.mcap
// stdout: {"file", "profile", "library", "message_count", "metadata": [names],
//          "topics": {topic: {"schema", "schema_encoding", "message_encoding",
//                             "message_count", "first": decoded first message}}, "errors": [...]}
// Exit status: 0 when the file is valid, 1 when it opened but a check failed (the JSON lists
// every failure under "errors"), 2 when it could not be opened as an indexed MCAP at all.

import { createHash } from "node:crypto";
import { open } from "node:fs/promises";

import { parse } from "@foxglove/rosmsg";
import { MessageReader } from "@foxglove/rosmsg2-serialization";
import { McapIndexedReader } from "@mcap/core";
import { loadDecompressHandlers } from "@mcap/support";

// rosbag2 names every type `package/msg/Name`; Foxglove's panels pick topics by these names
const ROS2_TYPE = /^[a-z][a-z0-9_]*\/msg\/[A-Z][A-Za-z0-9]*$/;
// arrays longer than this print as {length, head, sha256} (image data), shorter ones in full
const FULL_ARRAY = 64;
// CDR pads a message to 4-byte alignment; more unread bytes mean the schema is not the payload's
const CDR_PADDING = 3;

/** A random-access file for McapIndexedReader (Foxglove reads local files the same way). */
class FileReadable {
  constructor(handle, size) {
    this.handle = handle;
    this.bytes = size;
  }
  async size() {
    return BigInt(this.bytes);
  }
  async read(offset, size) {
    if (offset + size > BigInt(this.bytes)) {
      throw new Error(`read of ${size} bytes at ${offset} past the end (${this.bytes} bytes)`);
    }
    const buf = new Uint8Array(Number(size));
    await this.handle.read(buf, 0, buf.length, Number(offset));
    return buf;
  }
}

/** A decoded value as plain JSON: bigints as numbers, long typed arrays summarised. */
function plain(value) {
  if (typeof value === "bigint") {
    return Number.isSafeInteger(Number(value)) ? Number(value) : value.toString();
  }
  if (typeof value === "number" && !Number.isFinite(value)) return String(value);
  if (ArrayBuffer.isView(value)) {
    const items = Array.from(value, plain);
    if (items.length <= FULL_ARRAY) return items;
    const bytes = new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
    return {
      length: items.length,
      head: items.slice(0, 16),
      sha256: createHash("sha256").update(bytes).digest("hex"),
    };
  }
  if (Array.isArray(value)) {
    if (value.length > FULL_ARRAY && value.every((v) => typeof v !== "object")) {
      return { length: value.length, head: value.slice(0, 16).map(plain) };
    }
    return value.map(plain);
  }
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, plain(v)]));
  }
  return value;
}

async function openReader(path) {
  const handle = await open(path, "r");
  const { size } = await handle.stat();
  const decompressHandlers = await loadDecompressHandlers();
  try {
    const reader = await McapIndexedReader.Initialize({
      readable: new FileReadable(handle, size),
      decompressHandlers,
    });
    return { handle, reader };
  } catch (err) {
    await handle.close();
    throw err;
  }
}

/** Per channel: its topic, schema and a reader built from the schema text, or the failures. */
function channelReaders(reader, errors) {
  const decoder = new TextDecoder();
  const channels = new Map();
  for (const [id, channel] of reader.channelsById) {
    const where = `topic ${JSON.stringify(channel.topic)}`;
    const schema = reader.schemasById.get(channel.schemaId);
    const entry = { topic: channel.topic, encoding: channel.messageEncoding, schema, decoder: undefined };
    channels.set(id, entry);
    if (channel.messageEncoding !== "cdr") {
      errors.push(`${where}: message encoding ${JSON.stringify(channel.messageEncoding)}, not "cdr"`);
    }
    if (schema === undefined) {
      errors.push(`${where}: schema id ${channel.schemaId} is not in the summary`);
      continue;
    }
    if (schema.encoding !== "ros2msg") {
      errors.push(`${where}: schema encoding ${JSON.stringify(schema.encoding)}, not "ros2msg"`);
    }
    if (!ROS2_TYPE.test(schema.name)) {
      errors.push(`${where}: schema name ${JSON.stringify(schema.name)} is not a ROS 2 type name (package/msg/Name)`);
    }
    if (schema.data.length === 0) {
      errors.push(`${where}: schema ${schema.name} has no message definition text`);
      continue;
    }
    try {
      entry.decoder = new MessageReader(parse(decoder.decode(schema.data), { ros2: true }));
    } catch (err) {
      errors.push(`${where}: schema ${schema.name} does not parse: ${err.message}`);
    }
  }
  return channels;
}

async function readBag(path) {
  const errors = [];
  let opened;
  try {
    opened = await openReader(path);
  } catch (err) {
    process.stderr.write(`read_bag: ${path} is not a readable indexed MCAP file: ${err.message}\n`);
    process.exit(2);
  }
  const { handle, reader } = opened;
  try {
    if (reader.header.profile !== "ros2") {
      errors.push(`header profile ${JSON.stringify(reader.header.profile)}, not "ros2"`);
    }
    const stats = reader.statistics;
    if (stats === undefined) errors.push("the summary has no statistics record");
    const channels = channelReaders(reader, errors);
    const topics = {};
    for (const { topic, encoding, schema } of channels.values()) {
      topics[topic] = {
        schema: schema?.name ?? null,
        schema_encoding: schema?.encoding ?? null,
        message_encoding: encoding,
        message_count: 0,
        first: null,
      };
    }
    const counts = new Map();
    let total = 0;
    for await (const message of reader.readMessages({ validateCrcs: true })) {
      total += 1;
      const entry = channels.get(message.channelId);
      if (entry === undefined) {
        errors.push(`message on channel ${message.channelId}, which the summary does not list`);
        continue;
      }
      counts.set(message.channelId, (counts.get(message.channelId) ?? 0) + 1);
      const out = topics[entry.topic];
      out.message_count += 1;
      if (stats !== undefined && (message.logTime < stats.messageStartTime || message.logTime > stats.messageEndTime)) {
        errors.push(`${entry.topic}: log time ${message.logTime} outside the summary's span`);
      }
      if (entry.decoder === undefined) continue;
      const where = `${entry.topic} message ${out.message_count - 1}`;
      let decoded;
      try {
        decoded = entry.decoder.readMessage(message.data);
      } catch (err) {
        errors.push(`${where} does not decode as ${entry.schema.name}: ${err.message}`);
        continue;
      }
      const unread = message.data.byteLength - entry.decoder.lastReadByteLength();
      if (unread > CDR_PADDING) {
        errors.push(`${where}: ${unread} of ${message.data.byteLength} bytes left after decoding as ${entry.schema.name} (schema text and payload disagree)`);
      }
      if (out.first === null) out.first = plain(decoded);
    }
    if (stats !== undefined) {
      if (stats.messageCount !== BigInt(total)) {
        errors.push(`summary counts ${stats.messageCount} messages, the file holds ${total}`);
      }
      for (const [id, entry] of channels) {
        const want = stats.channelMessageCounts.get(id) ?? 0n;
        const got = BigInt(counts.get(id) ?? 0);
        if (want !== got) errors.push(`${entry.topic}: summary counts ${want} messages, the file holds ${got}`);
      }
    }
    const metadata = [];
    for await (const record of reader.readMetadata()) metadata.push(record.name);
    return {
      file: path,
      profile: reader.header.profile,
      library: reader.header.library,
      message_count: total,
      metadata,
      topics,
      errors,
    };
  } finally {
    await handle.close();
  }
}

const [path] = process.argv.slice(2);
if (path === undefined) {
  process.stderr.write("usage: node read_bag.mjs FILE.mcap\n");
  process.exit(2);
}
const result = await readBag(path);
process.stdout.write(`${JSON.stringify(result, null, 1)}\n`);
for (const err of result.errors) process.stderr.write(`read_bag: ${path}: ${err}\n`);
process.exit(result.errors.length ? 1 : 0);
