export * from './gen/process/process_pb.js';
export * from './gen/filesystem/filesystem_pb.js';
