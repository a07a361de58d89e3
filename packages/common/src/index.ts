export {
  codedError,
  DomainError,
  STATUS,
  conflict,
  invalid,
  isFault,
  notFound,
  withContext,
  type DomainErrorKind,
  type DomainErrorOptions,
} from './errors.js';
export { errorBody, errorHeaders, statusBody, type ErrorBody, type ErrorResponse } from './http.js';
export { checkApiKey, safeEqual } from './auth.js';
