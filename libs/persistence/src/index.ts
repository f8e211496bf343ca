export * from './prisma.service';
export * from './ids';
export * from './advisory-locks';
export * from './database-unavailable';
export * from './unique-violation';
