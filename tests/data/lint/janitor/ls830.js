/* purpose-built book for lorescan lint: ls830 */
var APPLY_LIMIT = 6;
var dynamicLore = [
  { keywords: ['harbor', 'pier*'], priority: 4, scenario: 'The harbor.', triggers: ['gull'] },
  { keywords: ['net'], triggers: ['fish'], scenario: 'Nets.' },
  { tag: 'gull', scenario: 'Gulls wheel overhead.' },
];
