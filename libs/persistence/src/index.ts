export * from './prisma.service';
export * from './ids';
